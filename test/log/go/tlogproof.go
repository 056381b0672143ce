// Reads a C2SP tlog-proof@v1 file and checks it with Go's sumdb packages, which share no code with
// the service: the checkpoint with golang.org/x/mod/sumdb/note and the inclusion of the extra line's
// bytes with golang.org/x/mod/sumdb/tlog. Usage: go run tlogproof.go <verifier key> <proof file>.
// Exit 0 and "ok <index> <size>" when it verifies; exit 1 naming what failed.
package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func fail(format string, args ...interface{}) {
	fmt.Printf("refused: "+format+"\n", args...)
	os.Exit(1)
}

// strictBase64 decodes standard padded base64 and refuses any text that is not the canonical encoding.
func strictBase64(text string) []byte {
	decoded, err := base64.StdEncoding.Strict().DecodeString(text)
	if err != nil || base64.StdEncoding.EncodeToString(decoded) != text {
		fail("not canonical base64: %q", text)
	}
	return decoded
}

func main() {
	verifier, err := note.NewVerifier(os.Args[1])
	if err != nil {
		fmt.Println("bad key:", err)
		os.Exit(2)
	}
	proof, err := os.ReadFile(os.Args[2])
	if err != nil {
		panic(err)
	}
	head, checkpoint, found := bytes.Cut(proof, []byte("\n\n"))
	if !found {
		fail("no empty line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" {
		fail("first line %q", lines[0])
	}
	at := 1
	var extra []byte
	if strings.HasPrefix(lines[at], "extra ") {
		extra = strictBase64(strings.TrimPrefix(lines[at], "extra "))
		at++
	}
	if extra == nil {
		fail("no extra line: the entry is needed to compute the leaf")
	}
	if at >= len(lines) || !strings.HasPrefix(lines[at], "index ") {
		fail("no index line")
	}
	indexText := strings.TrimPrefix(lines[at], "index ")
	index, err := strconv.ParseInt(indexText, 10, 64)
	if err != nil || strconv.FormatInt(index, 10) != indexText {
		fail("index %q", indexText)
	}
	at++
	var path tlog.RecordProof
	for _, line := range lines[at:] {
		hash := strictBase64(line)
		if len(hash) != tlog.HashSize {
			fail("a path hash of %d bytes", len(hash))
		}
		var h tlog.Hash
		copy(h[:], hash)
		path = append(path, h)
	}

	opened, err := note.Open(checkpoint, note.VerifierList(verifier))
	if err != nil {
		fail("checkpoint: %v", err)
	}
	body := strings.Split(strings.TrimSuffix(opened.Text, "\n"), "\n")
	if len(body) < 3 || body[0] != verifier.Name() {
		fail("checkpoint origin is not %q", verifier.Name())
	}
	size, err := strconv.ParseInt(body[1], 10, 64)
	if err != nil {
		fail("tree size %q", body[1])
	}
	root := strictBase64(body[2])
	if len(root) != tlog.HashSize {
		fail("root of %d bytes", len(root))
	}
	if index >= size {
		fail("index %d is not below the tree size %d", index, size)
	}
	var rootHash tlog.Hash
	copy(rootHash[:], root)
	if err := tlog.CheckRecord(path, size, rootHash, index, tlog.RecordHash(extra)); err != nil {
		fail("inclusion: %v", err)
	}
	fmt.Printf("ok %d %d\n", index, size)
}
