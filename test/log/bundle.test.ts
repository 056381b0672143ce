import { isDeepStrictEqual } from "node:util"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { verifyCheckpointConsistency, verifyReceiptBundle, type BundleStep, type BundleVerdict } from "../../src/client/log.js"
import { signCheckpoint } from "../../src/log/Checkpoint.js"
import { consistencyPath, hexOf, rootOf } from "../../src/log/Merkle.js"
import { noteSignerFromPrivateKey, verifierKeyOfSigner } from "../../src/log/Note.js"
import { signReceiptDigest } from "../../src/log/Entries.js"
import {
  buildLog,
  bundleFor,
  logSigner,
  logVerifierKey,
  origin,
  otherLogKey,
  otherReceiptSigner,
  overTheWire,
  receiptJwks,
  receiptSigner
} from "./logs.js"

const log = buildLog(20)
const good = () => overTheWire(bundleFor(log, 9))
const pinned = { receiptKeys: receiptJwks, verifierKey: logVerifierKey }
const steps: ReadonlyArray<BundleStep> = ["digest", "entry", "leaf", "inclusion", "checkpoint_signature", "receipt_signature"]

const stepOk = (verdict: BundleVerdict, step: BundleStep) => verdict.steps.find((s) => s.step === step)!.ok

/** Tampers a copy of the good bundle and returns the step named as the first failure. */
const failedStep = (tamper: (bundle: any) => void, options = pinned) => {
  const bundle = good()
  tamper(bundle)
  const verdict = verifyReceiptBundle(bundle, options)
  expect(verdict.ok).toBe(false)
  return verdict.failed_step
}

const flipHex = (hex: string) => (hex[0] === "0" ? "1" : "0") + hex.slice(1)

describe("receipt proof bundle: the good case", () => {
  it("passes every step, in order, with pinned keys", () => {
    const verdict = verifyReceiptBundle(good(), pinned)
    expect(verdict.steps.map((s) => [s.step, s.ok, s.checked])).toEqual(steps.map((step) => [step, true, true]))
    expect(verdict).toMatchObject({ ok: true, not_checked: [], keys: { verifier_key: "pinned", receipt_key: "pinned" } })
    expect(verdict.failed_step).toBeUndefined()
  })

  it("has the members of docs/API.md §11.7, and its log entry is the receipt's", () => {
    const bundle = good()
    expect(Object.keys(bundle).sort()).toEqual(["checkpoint", "inclusion_path", "leaf_index", "log_entry", "receipt", "verifier_key"])
    expect(bundle.log_entry).toEqual({
      type: "pv.log.receipt.v1",
      receipt_id: bundle.receipt.receipt_id,
      receipt_digest: bundle.receipt.receipt_digest,
      created_at: bundle.receipt.created_at
    })
    expect(bundle.leaf_index).toBe(9)
    expect(bundle.verifier_key).toBe(logVerifierKey)
    expect(bundle.inclusion_path).toHaveLength(5)
  })

  it("accepts a raw 32-byte receipt key; a key of the wrong length verifies nothing", () => {
    const raw = Buffer.from(receiptSigner.jwk.x, "base64url")
    expect(verifyReceiptBundle(good(), { receiptKeys: raw, verifierKey: logVerifierKey }).ok).toBe(true)
    expect(verifyReceiptBundle(good(), { receiptKeys: Buffer.alloc(31), verifierKey: logVerifierKey }).failed_step).toBe("receipt_signature")
  })

  it("without any receipt key the signature step is not checked, and the bundle is not ok", () => {
    const verdict = verifyReceiptBundle(good())
    expect(verdict.ok).toBe(false)
    expect(verdict.failed_step).toBeUndefined()
    expect(verdict.not_checked).toEqual(["receipt_signature"])
    expect(verdict.steps[5]).toMatchObject({ step: "receipt_signature", ok: false, checked: false })
    expect(verdict.keys).toEqual({ verifier_key: "bundle", receipt_key: "none" })
    expect(verdict.steps[4]!.detail).toContain("not pinned")
  })

  it("with receipt_key in the bundle it is self-contained, and says the keys are the bundle's own", () => {
    const bundle = overTheWire(bundleFor(log, 9, true))
    expect(bundle.receipt_key).toEqual(receiptSigner.jwk)
    const verdict = verifyReceiptBundle(bundle)
    expect(verdict.ok).toBe(true)
    expect(verdict.keys).toEqual({ verifier_key: "bundle", receipt_key: "bundle" })
    // Pinned keys win over the bundle's: a bundle key the relying party does not trust changes nothing.
    expect(verifyReceiptBundle({ ...bundle, receipt_key: otherReceiptSigner.jwk }, pinned).ok).toBe(true)
  })

  it("every receipt of random logs verifies (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 80 }), fc.nat(), (size, pick) => {
        const randomLog = buildLog(size)
        const indexes = [...randomLog.receipts.keys()]
        const index = indexes[pick % indexes.length]!
        expect(verifyReceiptBundle(overTheWire(bundleFor(randomLog, index)), pinned).ok).toBe(true)
      }),
      { numRuns: 40 }
    )
  })
})

describe("receipt proof bundle: each tampering fails at its step", () => {
  it("digest: the snapshot, a top-level field or the digest changed", () => {
    expect(failedStep((b) => (b.receipt.snapshot_payload.decision = "NOT_ACTIONABLE"))).toBe("digest")
    expect(failedStep((b) => (b.receipt.decision = "NOT_ACTIONABLE"))).toBe("digest")
    expect(failedStep((b) => delete b.receipt.tier)).toBe("digest")
    expect(failedStep((b) => (b.receipt.receipt_digest = flipHex(b.receipt.receipt_digest)))).toBe("digest")
    expect(failedStep((b) => (b.receipt.snapshot_payload = "x"))).toBe("digest")
  })

  it("entry: the log entry is not this receipt's", () => {
    expect(failedStep((b) => (b.log_entry.receipt_id = "rr_other"))).toBe("entry")
    expect(failedStep((b) => (b.log_entry.created_at = "2031-03-01T00:00:00.001Z"))).toBe("entry")
    expect(failedStep((b) => (b.log_entry.extra = true))).toBe("entry")
    expect(failedStep((b) => (b.log_entry = { type: "pv.log.event.v1", public_id: "DET-V1-LOG-0001", sequence: 1, eventHash: "1".repeat(64) }))).toBe("entry")
    // Another logged receipt's entry, index and path: a valid proof, but of another receipt.
    const other = overTheWire(bundleFor(log, 12))
    expect(failedStep((b) => Object.assign(b, { log_entry: other.log_entry, leaf_index: 12, inclusion_path: other.inclusion_path }))).toBe("entry")
  })

  it("leaf: an entry that cannot be a log entry at all", () => {
    expect(failedStep((b) => (b.log_entry = "not an object"))).toBe("entry")
    const verdict = verifyReceiptBundle({ ...good(), log_entry: null }, pinned)
    expect(stepOk(verdict, "leaf")).toBe(false)
    expect(stepOk(verdict, "inclusion")).toBe(false)
  })

  it("inclusion: another index, a changed or shortened path, a checkpoint of another tree", () => {
    expect(failedStep((b) => (b.leaf_index = 10))).toBe("inclusion")
    expect(failedStep((b) => (b.leaf_index = 20))).toBe("inclusion")
    expect(failedStep((b) => (b.leaf_index = -1))).toBe("inclusion")
    expect(failedStep((b) => (b.leaf_index = "9"))).toBe("inclusion")
    expect(failedStep((b) => (b.inclusion_path[2] = flipHex(b.inclusion_path[2])))).toBe("inclusion")
    expect(failedStep((b) => b.inclusion_path.pop())).toBe("inclusion")
    expect(failedStep((b) => b.inclusion_path.push(b.inclusion_path[0]))).toBe("inclusion")
    expect(failedStep((b) => (b.inclusion_path = "nope"))).toBe("inclusion")
    // Properly signed by the log, but of a larger tree: the path leads to the old root.
    const newer = buildLog(25)
    expect(failedStep((b) => (b.checkpoint = newer.checkpoint))).toBe("inclusion")
    expect(failedStep((b) => (b.checkpoint = 42))).toBe("inclusion")
  })

  it("checkpoint_signature: a corrupted signature, another key, or a bad verifier key", () => {
    const corrupt = (note: string) => note.replace(/ ([A-Za-z0-9+/]{10})/, (_, s: string) => " " + (s[0] === "A" ? "B" : "A") + s.slice(1))
    expect(failedStep((b) => (b.checkpoint = corrupt(b.checkpoint)))).toBe("checkpoint_signature")
    // Same body signed by an attacker under the log's name, with the attacker's key in the bundle.
    const attacker = noteSignerFromPrivateKey(origin, otherLogKey)
    const forged = signCheckpoint({ origin, size: log.size, root: rootOf(log.size, log.subtree), extensions: [] }, attacker)
    const forge = (b: any) => Object.assign(b, { checkpoint: forged, verifier_key: verifierKeyOfSigner(origin, otherLogKey) })
    expect(failedStep(forge)).toBe("checkpoint_signature")
    // Unpinned, the forgery is self-consistent: which is why the verdict reports whose key it used.
    const unpinned = good()
    forge(unpinned)
    const verdict = verifyReceiptBundle(unpinned, { receiptKeys: receiptJwks })
    expect(verdict.ok).toBe(true)
    expect(verdict.keys.verifier_key).toBe("bundle")
    expect(failedStep((b) => (b.verifier_key = "garbage"), { receiptKeys: receiptJwks } as typeof pinned)).toBe("checkpoint_signature")
  })

  it("receipt_signature: another signer, a corrupted or missing signature, keys without its kid", () => {
    expect(failedStep((b) => (b.receipt.signature = signReceiptDigest(b.receipt.receipt_digest, otherReceiptSigner)))).toBe("receipt_signature")
    expect(failedStep((b) => (b.receipt.signature = { ...signReceiptDigest(b.receipt.receipt_digest, otherReceiptSigner), kid: receiptSigner.kid })))
      .toBe("receipt_signature")
    expect(failedStep((b) => (b.receipt.signature.sig = b.receipt.signature.sig.replace(/^./, (c: string) => (c === "A" ? "B" : "A"))))).toBe("receipt_signature")
    expect(failedStep((b) => delete b.receipt.signature)).toBe("receipt_signature")
    expect(failedStep(() => undefined, { receiptKeys: { keys: [otherReceiptSigner.jwk] }, verifierKey: logVerifierKey })).toBe("receipt_signature")
    expect(failedStep(() => undefined, { receiptKeys: { keys: [] }, verifierKey: logVerifierKey })).toBe("receipt_signature")
  })

  it("never throws, whatever replaces or removes any member (property)", () => {
    const members = ["receipt", "log_entry", "leaf_index", "checkpoint", "inclusion_path", "verifier_key", "receipt_key"]
    // With both keys pinned, the bundle's own verifier_key and receipt_key are not used.
    const unused = ["verifier_key", "receipt_key"]
    fc.assert(
      fc.property(fc.constantFrom(...members), fc.option(fc.anything(), { nil: undefined }), (member, value) => {
        const bundle = good()
        // A value equal to the member's own changes nothing (fc.anything() drew 9 for a leaf_index of 9, seed -758578887).
        const unchanged = value !== undefined && isDeepStrictEqual(value, bundle[member])
        if (value === undefined) delete bundle[member]
        else bundle[member] = value
        const verdict = verifyReceiptBundle(bundle, pinned)
        expect(verdict.steps.map((s) => s.step)).toEqual(steps)
        expect(verdict.ok).toBe(unused.includes(member) || unchanged)
      }),
      { numRuns: 300 }
    )
    for (const garbage of [null, undefined, 1, "x", [], [good()], { receipt: { signature: { alg: "Ed25519", kid: {}, sig: [] } } }]) {
      const verdict = verifyReceiptBundle(garbage, pinned)
      expect(verdict.ok).toBe(false)
      expect(verdict.steps).toHaveLength(6)
      expect(verdict.failed_step).toBe("digest")
    }
  })
})

describe("checkpoint consistency (monitors)", () => {
  const big = buildLog(40)
  const checkpointAt = (size: number) => signCheckpoint({ origin, size, root: rootOf(size, big.subtree), extensions: [] }, logSigner)
  const pathHex = (first: number, second: number) => consistencyPath(first, second, big.subtree).map(hexOf)

  it("an older checkpoint of the same log is consistent with a newer one", () => {
    for (const [first, second] of [[1, 40], [13, 40], [16, 32], [0, 7], [40, 40]] as const) {
      const verdict = verifyCheckpointConsistency(checkpointAt(first), checkpointAt(second), pathHex(first, second), logVerifierKey)
      expect(verdict).toMatchObject({ ok: true, older: { size: first }, newer: { size: second, root: hexOf(rootOf(second, big.subtree)) } })
    }
  })

  it("detects rollback, fork, bad proofs and checkpoints not signed by the log", () => {
    const failure = (older: unknown, newer: unknown, path: unknown, key = logVerifierKey) => {
      const verdict = verifyCheckpointConsistency(older, newer, path, key)
      return verdict.ok ? "ok" : verdict.failure
    }
    expect(failure(checkpointAt(30), checkpointAt(20), pathHex(20, 30))).toBe("rollback")
    // Another history of the same log, signed by the same key: a split view.
    const other = buildLog(30, 1)
    const otherAt = (size: number) => signCheckpoint({ origin, size, root: rootOf(size, other.subtree), extensions: [] }, logSigner)
    const otherPath = consistencyPath(20, 30, other.subtree).map(hexOf)
    expect(failure(otherAt(20), otherAt(30), otherPath)).toBe("ok")
    expect(failure(checkpointAt(20), otherAt(20), [])).toBe("fork")
    expect(failure(checkpointAt(20), otherAt(30), otherPath)).toBe("inconsistent")
    expect(failure(checkpointAt(20), otherAt(30), pathHex(20, 30))).toBe("inconsistent")
    const path = pathHex(13, 40)
    expect(failure(checkpointAt(13), checkpointAt(40), [flipHex(path[0]!), ...path.slice(1)])).toBe("inconsistent")
    expect(failure(checkpointAt(13), checkpointAt(40), path.slice(1))).toBe("inconsistent")
    expect(failure(checkpointAt(13), checkpointAt(40), [...path, path[0]])).toBe("inconsistent")
    expect(failure(checkpointAt(13), checkpointAt(40), "nope")).toBe("malformed_proof")
    expect(failure(checkpointAt(13), checkpointAt(40), [path[0]!.toUpperCase()])).toBe("malformed_proof")
    const stranger = signCheckpoint({ origin, size: 13, root: rootOf(13, big.subtree), extensions: [] }, noteSignerFromPrivateKey(origin, otherLogKey))
    expect(failure(stranger, checkpointAt(40), path)).toBe("older_checkpoint")
    expect(failure(checkpointAt(13), "garbage", path)).toBe("newer_checkpoint")
    expect(failure(checkpointAt(13), checkpointAt(40), path, "not+a+key")).toBe("older_checkpoint")
    expect(failure(null, undefined, null)).toBe("older_checkpoint")
  })
})
