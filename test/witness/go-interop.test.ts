import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { signCheckpoint } from "../../src/log/Checkpoint.js"
import { appendSignatureLines, cosignerFromPrivateKey } from "../../src/log/Cosignature.js"
import { noteSignerFromPrivateKey, verifierKeyOfSigner } from "../../src/log/Note.js"
import { leafHash } from "../../src/log/Merkle.js"

/**
 * Interoperability with Go's golang.org/x/mod/sumdb/note (Debian's golang-golang-x-mod-dev, GOPATH mode):
 * Go opens a witnessed checkpoint with the log's verifier key alone, keeping the witnesses' cosignature
 * lines as signatures it does not know. Skipped, saying so, where Go or the package is absent.
 */

const gopath = "/usr/share/gocode"
const goAvailable = spawnSync("go", ["version"], { encoding: "utf8" }).status === 0 && existsSync(join(gopath, "src/golang.org/x/mod/sumdb/note/note.go"))
if (!goAvailable) console.warn("go-interop: skipped: `go` or golang.org/x/mod (apt-get install golang-go golang-golang-x-mod-dev) is not installed")

const program = `package main

import (
	"fmt"
	"os"

	"golang.org/x/mod/sumdb/note"
)

func main() {
	msg, err := os.ReadFile(os.Args[2])
	if err != nil {
		panic(err)
	}
	v, err := note.NewVerifier(os.Args[1])
	if err != nil {
		fmt.Println("bad key:", err)
		os.Exit(2)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		fmt.Println("refused:", err)
		os.Exit(1)
	}
	fmt.Printf("verified=%d unverified=%d\\n", len(n.Sigs), len(n.UnverifiedSigs))
	for _, s := range n.UnverifiedSigs {
		fmt.Printf("unknown %s %08x\\n", s.Name, s.Hash)
	}
	fmt.Print(n.Text)
}
`

const scratch = mkdtempSync(join(tmpdir(), "pv-go-interop-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const runGo = (vkey: string, note: string) => {
  writeFileSync(join(scratch, "main.go"), program)
  writeFileSync(join(scratch, "note.txt"), note)
  return spawnSync("go", ["run", join(scratch, "main.go"), vkey, join(scratch, "note.txt")], {
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, GO111MODULE: "off", GOPATH: gopath, GOCACHE: join(scratch, "cache"), GOFLAGS: "" }
  })
}

describe.skipIf(!goAvailable)("Go's sumdb/note and witnessed checkpoints", () => {
  const logKey = privateKeyFromSeed(Buffer.alloc(32, 9))
  const log = noteSignerFromPrivateKey("localhost/pv-log", logKey)
  const checkpoint = { origin: "localhost/pv-log", size: 3, root: leafHash(Buffer.from("x")), extensions: [] }
  const w1 = cosignerFromPrivateKey("witness.test/w1", privateKeyFromSeed(Buffer.alloc(32, 31)))
  const w2 = cosignerFromPrivateKey("witness.test/w2", privateKeyFromSeed(Buffer.alloc(32, 32)))
  const plain = signCheckpoint(checkpoint, log)
  const text = plain.slice(0, plain.indexOf("\n\n") + 1)
  const witnessed = appendSignatureLines(plain, [w1.cosign(text, 1_800_000_000), w2.cosign(text, 1_800_000_001)])

  it("opens the cosigned checkpoint with the log's key; the two cosignatures are unknown signatures, ignored", () => {
    const run = runGo(verifierKeyOfSigner("localhost/pv-log", logKey), witnessed)
    expect(run.status, run.stderr + run.stdout).toBe(0)
    const hex = (id: Uint8Array) => Buffer.from(id).toString("hex")
    expect(run.stdout).toBe(`verified=1 unverified=2\nunknown witness.test/w1 ${hex(w1.keyId)}\nunknown witness.test/w2 ${hex(w2.keyId)}\n${text}`)
  }, 150_000)

  it("still refuses the note when the log's own signature is broken, cosignatures or not", () => {
    const broken = witnessed.replace(/(— localhost\/pv-log [A-Za-z0-9+/]{10})([A-Za-z0-9+/])/, (_, head: string, c: string) => head + (c === "A" ? "B" : "A"))
    const run = runGo(verifierKeyOfSigner("localhost/pv-log", logKey), broken)
    expect(run.status).toBe(1)
    expect(run.stdout).toMatch(/refused/)
  }, 150_000)
})
