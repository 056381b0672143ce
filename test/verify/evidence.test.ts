import { decode, Tag } from "cbor2"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { signCheckpoint } from "../../src/log/Checkpoint.js"
import { entryBytesOf } from "../../src/log/Entries.js"
import { noteSignerFromPrivateKey, type NoteSigner } from "../../src/log/Note.js"
import { coseReceiptOf, tlogProofOf, transparentStatementOf, type StatementSigner } from "../../src/log/ReceiptFormats.js"
import type { ReceiptProofBundle, SignedRelianceReceipt } from "../../src/log/ReceiptProof.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { base64Of } from "../../src/verify/Bytes.js"
import { cborEncode, coseSign1, parseCoseReceipt, parseTransparentStatement, sigStructure } from "../../src/verify/Cose.js"
import { evidenceKindOf, verifyEvidence, type EvidenceStep, type EvidenceVerdict, type EvidenceVerifyOptions } from "../../src/verify/Evidence.js"
import { nodeCrypto, verifySync } from "../../src/verify/NodeCrypto.js"
import { runAsync, runSync, type SyncCrypto } from "../../src/verify/Run.js"
import { bundleVerifier } from "../../src/web/Bundle.js"
import { verifyEvidence as verifyInBrowser, webCrypto } from "../../src/web/verifier.js"
import { buildLog, bundleFor, logSigner, logVerifierKey, origin, otherLogKey, receiptJwks, receiptSigner } from "../log/logs.js"

const statementSigner: StatementSigner = { kid: receiptSigner.kid, sign: (input) => new Uint8Array(Buffer.from(receiptSigner.sign(input), "base64url")) }
const pinned: EvidenceVerifyOptions = { verifierKey: logVerifierKey, receiptKeys: receiptJwks }

const log = buildLog(20)
const bundle = bundleFor(log, 9)
const receipt = log.receipts.get(9)!

const encodings = (b: ReceiptProofBundle = bundle, r: SignedRelianceReceipt = receipt, signer: NoteSigner = logSigner) => {
  const cose = coseReceiptOf(b, signer)
  return { tlog: tlogProofOf(b), cose, statement: transparentStatementOf(r, cose, origin, statementSigner) }
}

const verify = (input: unknown, options: EvidenceVerifyOptions = { ...pinned, receipt }): EvidenceVerdict => verifySync(verifyEvidence(input, options))

const failedAt = (input: unknown, options?: EvidenceVerifyOptions): EvidenceStep | undefined => {
  const verdict = verify(input, options)
  expect(verdict.ok, JSON.stringify(verdict.steps)).toBe(false)
  return verdict.failed_step
}

describe("evidence in standard encodings: the good case", () => {
  it("each encoding is recognised by content and passes every step with pinned keys", () => {
    const { tlog, cose, statement } = encodings()
    expect(evidenceKindOf(tlog)).toBe("tlog-proof")
    expect(evidenceKindOf(Buffer.from(tlog))).toBe("tlog-proof")
    expect(evidenceKindOf(cose)).toBe("cose-receipt")
    expect(evidenceKindOf(statement)).toBe("transparent-statement")
    expect(evidenceKindOf(JSON.stringify(bundle))).toBe("bundle")
    expect(verify(tlog).steps.map((s) => [s.step, s.ok])).toEqual(
      ["format", "entry", "leaf", "inclusion", "checkpoint_signature"].map((s) => [s, true]))
    expect(verify(cose).steps.map((s) => [s.step, s.ok])).toEqual(["format", "entry", "leaf", "inclusion", "kid", "log_signature"].map((s) => [s, true]))
    expect(verify(statement, pinned).steps.map((s) => [s.step, s.ok])).toEqual(
      ["format", "kid", "statement_signature", "digest", "claims", "entry", "format", "leaf", "inclusion", "kid", "log_signature", "receipt_signature"]
        .map((s) => [s, true]))
    expect(verify(JSON.stringify(bundle), pinned)).toMatchObject({ kind: "bundle", ok: true })
  })

  it("the tlog-proof is C2SP tlog-proof@v1 line by line", () => {
    const lines = tlogProofOf(bundle).split("\n")
    expect(lines[0]).toBe("c2sp.org/tlog-proof@v1")
    expect(lines[1]).toBe(`extra ${Buffer.from(entryBytesOf(bundle.log_entry)).toString("base64")}`)
    expect(lines[2]).toBe("index 9")
    expect(lines.slice(3, 3 + bundle.inclusion_path.length)).toEqual(bundle.inclusion_path.map((h) => Buffer.from(h, "hex").toString("base64")))
    expect(lines.slice(3 + bundle.inclusion_path.length).join("\n")).toBe(`\n${bundle.checkpoint}`)
  })

  it("the COSE Receipt is tag 18 with exactly the headers of docs/API.md, payload nil", () => {
    const value = decode(encodings().cose, { preferMap: true }) as Tag
    expect(value).toBeInstanceOf(Tag)
    expect(Number(value.tag)).toBe(18)
    const [protectedBytes, unprotected, payload, signature] = value.contents as Array<any>
    expect(decode(protectedBytes, { preferMap: true })).toEqual(new Map<number, unknown>([[1, -8], [4, new Uint8Array(logSigner.keyId)], [395, 1]]))
    expect(payload).toBeNull()
    expect(signature).toHaveLength(64)
    const proof = decode(unprotected.get(396).get(-1)[0])
    expect(proof).toEqual([20, 9, bundle.inclusion_path.map((h) => new Uint8Array(Buffer.from(h, "hex")))])
  })

  it("without pinned keys the signature steps are not checked, so nothing verifies", () => {
    const { tlog, cose, statement } = encodings()
    for (const input of [tlog, cose, statement]) {
      const verdict = verify(input, { receipt })
      expect(verdict.ok).toBe(false)
      expect(verdict.failed_step).toBeUndefined()
      expect(verdict.not_checked.length).toBeGreaterThan(0)
    }
  })
})

/** The inclusion proof a COSE Receipt (or a statement's embedded one) carries. */
const proofIn = (bytes: Uint8Array) => {
  const statement = parseTransparentStatement(bytes)
  const receiptBytes = statement.ok ? statement.value.receipts[0] : bytes
  const parsed = parseCoseReceipt(receiptBytes)
  return parsed.ok ? parsed.value.proof : undefined
}

/**
 * node:crypto, with each Ed25519 verdict kept by its exact inputs (key, message, signature). A flip outside what a
 * signature covers asks node:crypto the same question again: of the ~11,400 verifications of the flips below, ~5,300
 * differ (each ~0.2 ms of CPU). The verdict is a function of those bytes alone, so every distinct question is still
 * asked of node:crypto and every verifier step runs as it does with `verifySync`.
 */
const verdicts = new Map<string, boolean>()
const memoCrypto: SyncCrypto = {
  ...nodeCrypto,
  ed25519Verify: (publicKey, message, signature) => {
    const id = `${Buffer.from(publicKey).toString("hex")} ${Buffer.from(signature).toString("hex")} ${Buffer.from(message).toString("latin1")}`
    let verdict = verdicts.get(id)
    if (verdict === undefined) verdicts.set(id, verdict = nodeCrypto.ed25519Verify(publicKey, message, signature))
    return verdict
  }
}

describe("evidence: every byte flipped is refused by our verifiers", () => {
  const { tlog, cose, statement } = encodings()
  const cases: Array<[string, Uint8Array]> = [["tlog-proof", Buffer.from(tlog)], ["COSE Receipt", cose], ["Transparent Statement", statement]]
  for (const [name, bytes] of cases) {
    // Every bit of the two small formats; the statement (mostly the JSON payload) one bit of every byte.
    const bits = name === "Transparent Statement" ? [0] : [0, 1, 2, 3, 4, 5, 6, 7]
    it(`${name}: each of its ${bytes.length} bytes, bit(s) ${bits.join(", ")}`, { timeout: 180_000 }, () => {
      const original = proofIn(bytes)
      const unbound: Array<number> = []
      for (let i = 0; i < bytes.length; i++) {
        for (const bit of bits) {
          const copy = new Uint8Array(bytes)
          copy[i] = copy[i]! ^ (1 << bit)
          const verdict = runSync(verifyEvidence(copy, { ...pinned, receipt }), memoCrypto)
          if (!verdict.ok) {
            expect(verdict.failed_step).toBeDefined()
            continue
          }
          // RFC 9942 signs the root, not tree_size (unprotected): a tree_size for which the same path leads
          // to the same root is the one change no receipt verifier can see (docs/API.md says so). Nothing else passes.
          const mutated = proofIn(copy)
          if (original === undefined || mutated === undefined || mutated.treeSize === original.treeSize || mutated.leafIndex !== original.leafIndex) {
            throw new Error(`${name}: flipping bit ${bit} of byte ${i} still verifies`)
          }
          expect(mutated.path).toEqual(original.path)
          unbound.push(mutated.treeSize)
        }
      }
      if (name === "tlog-proof") expect(unbound).toEqual([])
    })
  }
})

const resignedCose = (mutate: (parts: { protectedBytes: Uint8Array; proof: [number, number, Array<Uint8Array>] }) => void, root: Uint8Array, signer = logSigner) => {
  const parts = { protectedBytes: cborEncode(new Map<number, unknown>([[1, -8], [4, new Uint8Array(signer.keyId)], [395, 1]])), proof: [20, 9, bundle.inclusion_path.map((h) => new Uint8Array(Buffer.from(h, "hex")))] as [number, number, Array<Uint8Array>] }
  mutate(parts)
  const unprotected = new Map<number, unknown>([[396, new Map([[-1, [cborEncode(parts.proof)]]])]])
  return cborEncode(coseSign1(parts.protectedBytes, unprotected, null, signer.sign(sigStructure(parts.protectedBytes, root))))
}

describe("evidence: each crafted fault is refused at its own step", () => {
  const checkpointRoot = () => Buffer.from(bundle.checkpoint.split("\n")[2]!, "base64")

  it("a leaf index at or beyond the tree size (tlog-proof and COSE Receipt)", () => {
    expect(failedAt(tlogProofOf({ ...bundle, leaf_index: 20 }))).toBe("inclusion")
    const tlog = tlogProofOf(bundle).replace("index 9", "index 20")
    expect(failedAt(tlog)).toBe("inclusion")
    expect(failedAt(resignedCose((p) => (p.proof[1] = 20), checkpointRoot()))).toBe("inclusion")
    expect(failedAt(resignedCose((p) => (p.proof[1] = 21), checkpointRoot()))).toBe("inclusion")
  })

  it("a wrong kid (COSE Receipt: not the log key ID; statement: not a pinned kid)", () => {
    const other = noteSignerFromPrivateKey(origin, otherLogKey)
    expect(failedAt(resignedCose(() => {}, checkpointRoot(), other))).toBe("kid")
    expect(failedAt(resignedCose((p) => (p.protectedBytes = cborEncode(new Map<number, unknown>([[1, -8], [4, Uint8Array.of(1, 2, 3, 4)], [395, 1]]))), checkpointRoot()))).toBe("kid")
    const { cose } = encodings()
    const wrongKid = transparentStatementOf(receipt, cose, origin, { ...statementSigner, kid: "not-a-kid" })
    expect(failedAt(wrongKid, pinned)).toBe("kid")
  })

  it("a wrong origin (the checkpoint's, and the statement's iss)", () => {
    const elsewhere = "evil.example/log"
    const forged = signCheckpoint({ origin: elsewhere, size: log.size, root: checkpointRoot(), extensions: [] }, noteSignerFromPrivateKey(elsewhere, privateKeyFromSeed(Buffer.alloc(32, 11))))
    expect(failedAt(tlogProofOf({ ...bundle, checkpoint: forged }))).toBe("checkpoint_signature")
    const { cose } = encodings()
    expect(failedAt(transparentStatementOf(receipt, cose, elsewhere, statementSigner), pinned)).toBe("claims")
  })

  it("a truncated path", () => {
    const short = { ...bundle, inclusion_path: bundle.inclusion_path.slice(0, -1) }
    expect(failedAt(tlogProofOf(short))).toBe("inclusion")
    expect(failedAt(resignedCose((p) => p.proof[2].pop(), checkpointRoot()))).toBe("inclusion")
    expect(failedAt(coseReceiptOf(short, logSigner))).toBe("inclusion")
  })

  it("non-canonical base64 (stray bits, no padding) and non-canonical CBOR", () => {
    const lines = tlogProofOf(bundle).split("\n")
    const hash = lines[3]!
    const strayBits = hash.slice(0, 42) + String.fromCharCode(hash.charCodeAt(42) + 1) + "="
    expect(failedAt([...lines.slice(0, 3), strayBits, ...lines.slice(4)].join("\n"))).toBe("format")
    expect(failedAt([...lines.slice(0, 3), hash.replace(/=$/, ""), ...lines.slice(4)].join("\n"))).toBe("format")
    expect(failedAt([lines[0], lines[1]!.replace(/=+$/, ""), ...lines.slice(2)].join("\n"))).toBe("format")
    // The same COSE value with a long-form length: decodes, but is not the deterministic encoding.
    const { cose } = encodings()
    const long = new Uint8Array([...cose.subarray(0, 2), 0x58, cose[2]! - 0x40, ...cose.subarray(3)])
    expect(failedAt(long)).toBe("format")
  })

  it("a statement whose payload is not the receipt it claims (edited decision, re-signed)", () => {
    const edited = { ...receipt, decision: receipt.decision === "ACTIONABLE" ? "NOT_ACTIONABLE" : "ACTIONABLE" } as SignedRelianceReceipt
    expect(failedAt(transparentStatementOf(edited, encodings().cose, origin, statementSigner), pinned)).toBe("digest")
  })

  it("a COSE Receipt checked against another receipt's entry: the path leads to another root, which the log did not sign", () => {
    expect(failedAt(encodings().cose, { ...pinned, receipt: log.receipts.get(12)! })).toBe("log_signature")
  })

  it("pinned witnesses cannot be met by a COSE Receipt (it carries no cosignatures)", () => {
    const witness = "witness.test/w1+8d3c2b1a+BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    const verdict = verify(encodings().cose, { ...pinned, receipt, witnesses: [witness] })
    expect(verdict.failed_step).toBe("witness_cosignatures")
  })
})

describe("evidence: properties", () => {
  it("for any tree and any receipt in it, all three encodings verify and agree on index, size and root", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 40 }), fc.nat(), (size, pick) => {
      const tree = buildLog(size)
      const indexes = [...tree.receipts.keys()]
      const index = indexes[pick % indexes.length]!
      const b = bundleFor(tree, index)
      const r = tree.receipts.get(index)!
      const { tlog, cose, statement } = encodings(b, r)
      expect(verify(tlog, { ...pinned, receipt: r }).ok).toBe(true)
      expect(verify(cose, { ...pinned, receipt: r }).ok).toBe(true)
      expect(verify(statement, pinned).ok).toBe(true)
      const proof = decode((decode(cose, { preferMap: true }) as Tag).contents instanceof Array
        ? (((decode(cose, { preferMap: true }) as Tag).contents as Array<any>)[1].get(396).get(-1)[0])
        : new Uint8Array())
      expect(proof).toEqual([size, index, b.inclusion_path.map((h) => new Uint8Array(Buffer.from(h, "hex")))])
      expect(tlog).toContain(`\nindex ${index}\n`)
    }), { numRuns: 60 })
  })

  it("never throws and never passes on arbitrary input, bytes or text, of any kind", () => {
    const { tlog, cose, statement } = encodings()
    const arbitrary = fc.oneof(
      fc.uint8Array({ maxLength: 400 }),
      fc.string({ maxLength: 400 }),
      // Plausible starts: a COSE_Sign1 header or the tlog-proof header, then anything.
      fc.uint8Array({ maxLength: 300 }).map((tail) => new Uint8Array([...cose.subarray(0, 20), ...tail])),
      fc.uint8Array({ maxLength: 300 }).map((tail) => new Uint8Array([...statement.subarray(0, 120), ...tail])),
      fc.string({ maxLength: 300 }).map((tail) => tlog.slice(0, 60) + tail)
    )
    fc.assert(fc.property(arbitrary, (input) => {
      const verdict = verify(input)
      expect(verdict.ok).toBe(false)
    }), { numRuns: 300 })
  })

  it("the tlog-proof reader refuses any base64 that is not canonical padded standard base64", () => {
    fc.assert(fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.integer({ min: 0, max: 43 }), (hash, at) => {
      const text = base64Of(hash)
      const lines = tlogProofOf(bundle).split("\n")
      const mutated = text.slice(0, at) + "-" + text.slice(at + 1)
      expect(failedAt([...lines.slice(0, 3), mutated, ...lines.slice(4)].join("\n"))).toBe("format")
    }))
  })
})

describe("evidence: the page's verifier (WebCrypto) gives the client module's verdicts", () => {
  it("for each encoding, good and with a byte flipped", async () => {
    const { tlog, cose, statement } = encodings()
    for (const input of [tlog, cose, statement]) {
      const flipped = typeof input === "string" ? Buffer.from(input.replace("index 9", "index 8")) : new Uint8Array(input)
      if (!(typeof input === "string")) flipped[flipped.length - 1] = flipped[flipped.length - 1]! ^ 1
      for (const candidate of [input, flipped]) {
        const options = candidate === statement ? pinned : { ...pinned, receipt }
        expect(await verifyInBrowser(candidate, options)).toEqual(verify(candidate, options))
        expect(await runAsync(verifyEvidence(candidate, options), webCrypto)).toEqual(verify(candidate, options))
      }
    }
  })

  it("bundles into the page's module with the CBOR decoder (esbuild, browser platform)", { timeout: 120_000 }, async () => {
    const text = Buffer.from(await bundleVerifier()).toString("utf8")
    expect(text).toContain("c2sp.org/tlog-proof@v1")
    expect(text).toContain("verifyEvidence")
  })
})
