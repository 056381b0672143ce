import { afterAll, describe, expect, it } from "vitest"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { appendSignatureLines, cosignerFromPrivateKey } from "../../src/log/Cosignature.js"
import { tlogProofOf } from "../../src/log/ReceiptFormats.js"
import { goAvailable, goMissing, goTlogProofRunner } from "../support/goTlogProof.js"
import { buildLog, bundleFor, logVerifierKey } from "./logs.js"

/**
 * C2SP tlog-proof@v1 as Go reads it: go/tlogproof.go (a fixture written for this test) opens the
 * checkpoint with golang.org/x/mod/sumdb/note and checks the inclusion of `extra` with sumdb/tlog's
 * CheckRecord. Debian's golang-golang-x-mod-dev, GOPATH mode; skipped, saying so, where Go is absent.
 */

if (!goAvailable) console.warn(`tlog-proof Go interop: skipped: ${goMissing}`)

const go = goTlogProofRunner()
afterAll(go.close)
const runGo = go.run

describe.skipIf(!goAvailable)("Go's sumdb/note and sumdb/tlog read our tlog-proof", () => {
  const log = buildLog(37)

  it("verifies the proofs of receipts at several indexes, one with witness cosignatures on the checkpoint", { timeout: 300_000 }, async () => {
    for (const index of [0, 9, 33, 36]) {
      const run = await runGo(logVerifierKey, tlogProofOf(bundleFor(log, index)))
      expect(run.status, run.stderr + run.stdout).toBe(0)
      expect(run.stdout.trim()).toBe(`ok ${index} 37`)
    }
    const witness = cosignerFromPrivateKey("witness.test/w1", privateKeyFromSeed(Buffer.alloc(32, 31)))
    const text = log.checkpoint.slice(0, log.checkpoint.indexOf("\n\n") + 1)
    const cosigned = appendSignatureLines(log.checkpoint, [witness.cosign(text, 1_800_000_000)])
    const run = await runGo(logVerifierKey, tlogProofOf({ ...bundleFor(log, 9), checkpoint: cosigned }))
    expect(run.status, run.stderr + run.stdout).toBe(0)
  })

  it("refuses what our verifier refuses: another entry in extra, a wrong index, a truncated path, an edited checkpoint", { timeout: 300_000 }, async () => {
    const good = tlogProofOf(bundleFor(log, 9))
    const lines = good.split("\n")
    const otherExtra = tlogProofOf(bundleFor(log, 12)).split("\n")[1]!
    const cases = [
      [otherExtra, ...lines.slice(1 + 1)].join("\n").replace(/^/, `${lines[0]}\n`),
      good.replace("\nindex 9\n", "\nindex 10\n"),
      [...lines.slice(0, 3), ...lines.slice(4)].join("\n"),
      good.replace(/\n37\n/, "\n38\n")
    ]
    for (const proof of cases) {
      const run = await runGo(logVerifierKey, proof)
      expect(run.status, run.stdout).toBe(1)
      expect(run.stdout).toMatch(/^refused: /)
    }
  })
})
