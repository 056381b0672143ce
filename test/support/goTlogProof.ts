import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Ran, runProcess } from "./spawned.js"

/**
 * Runs test/log/go/tlogproof.go (Go's sumdb/note and sumdb/tlog, Debian's golang-golang-x-mod-dev in GOPATH
 * mode) on a tlog-proof. `goAvailable` is false (`goMissing` says why) where Go or the packages are absent.
 */

const gopath = "/usr/share/gocode"
export const goAvailable = spawnSync("go", ["version"], { encoding: "utf8" }).status === 0 &&
  existsSync(join(gopath, "src/golang.org/x/mod/sumdb/tlog/tlog.go")) && existsSync(join(gopath, "src/golang.org/x/mod/sumdb/note/note.go"))
export const goMissing = "`go` or golang.org/x/mod (apt-get install golang-go golang-golang-x-mod-dev) is not installed"

const program = fileURLToPath(new URL("../log/go/tlogproof.go", import.meta.url))

/**
 * A scratch directory for proofs and Go's build cache; `close` removes it. `run` does not block the event loop
 * (support/spawned.ts, `runProcess`): the first one compiles the program and Go's packages, seconds of CPU.
 */
export const goTlogProofRunner = () => {
  const scratch = mkdtempSync(join(tmpdir(), "pv-tlog-proof-go-"))
  let runs = 0
  return {
    run: (verifierKey: string, proof: string | Uint8Array): Promise<Ran> => {
      const file = join(scratch, `proof-${runs++}.tlog-proof`)
      writeFileSync(file, proof)
      return runProcess("go", ["run", program, verifierKey, file], {
        timeoutMs: 120_000,
        env: { ...process.env, GO111MODULE: "off", GOPATH: gopath, GOCACHE: join(scratch, "cache"), GOFLAGS: "" }
      })
    },
    close: () => rmSync(scratch, { recursive: true, force: true })
  }
}
