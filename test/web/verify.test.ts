import { sign } from "node:crypto"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { verifyReceiptBundle, type BundleVerdict, type BundleVerifyOptions } from "../../src/client/log.js"
import { canonicalJson, digestOf } from "../../src/domain/Canonical.js"
import { EventTypes, type TrustEvent } from "../../src/domain/TrustEvent.js"
import { eventHashOf } from "../../src/domain/EventChain.js"
import { verifyEventChain, type ChainVerdict, type VerifyOptions } from "../../src/domain/EventVerify.js"
import { signCheckpoint } from "../../src/log/Checkpoint.js"
import { appendSignatureLines, cosignerFromPrivateKey } from "../../src/log/Cosignature.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { signReceiptDigest } from "../../src/log/Entries.js"
import { noteSignerFromPrivateKey, verifierKeyOfSigner } from "../../src/log/Note.js"
import { rootOf } from "../../src/log/Merkle.js"
import { nodeCrypto } from "../../src/verify/NodeCrypto.js"
import type { AsyncCrypto } from "../../src/verify/Run.js"
import { importBundledVerifier } from "./bundled.js"
import { buildChain, headOf, otherSigner, testJwks, testSigner, type ChainItem } from "../events/chains.js"
import { buildLog, bundleFor, logVerifierKey, origin, otherLogKey, otherReceiptSigner, overTheWire, receiptJwks, receiptSigner, type TestLog } from "../log/logs.js"

/**
 * The page's verification module (/web/verify.js: src/web/browser.ts bundled for the browser, running
 * the verifiers of src/verify with WebCrypto) against the client module's (the same source run with
 * node:crypto), on generated inputs: the same JCS text, the same event hashes, and the same verdict,
 * first failing sequence, reason, failing step and detail for good and tampered chains and bundles.
 * Node's globalThis.crypto.subtle has Ed25519, so the bundle runs here as the browser gets it; what
 * these properties catch is a difference between the two crypto providers or a bundling mistake.
 */

interface WebChainReport {
  readonly events: ReadonlyArray<{ readonly hash_ok: boolean; readonly link_ok: boolean; readonly signature_ok: boolean }>
}

interface WebVerify {
  readonly webCrypto: AsyncCrypto
  readonly canonicalJson: (value: unknown) => string
  readonly digestOf: (value: unknown) => Promise<string>
  readonly eventHashOf: (event: Record<string, unknown>) => Promise<string>
  readonly verifyEventChain: (events: ReadonlyArray<unknown>, jwks: unknown, options?: VerifyOptions) => Promise<ChainVerdict & WebChainReport>
  readonly verifyReceiptBundle: (
    bundle: unknown,
    options?: { readonly receiptKeys?: unknown; readonly verifierKey?: string; readonly witnesses?: ReadonlyArray<string>; readonly quorum?: number; readonly nowSeconds?: number }
  ) => Promise<BundleVerdict>
}

const web = await importBundledVerifier<WebVerify>()

const withoutRows = ({ events: _, ...verdict }: ChainVerdict & WebChainReport) => verdict

const jsonObject = fc.dictionary(fc.string({ maxLength: 8 }), fc.unicodeJsonValue({ maxDepth: 3 }), { maxKeys: 5 })

describe("the page's JCS and digests agree with the service's", () => {
  it("canonical JSON of any JSON value is the `canonicalize` package's (property)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.unicodeJsonValue({ maxDepth: 5 }), async (value) => {
        expect(web.canonicalJson(value)).toBe(canonicalJson(value))
        expect(await web.digestOf(value)).toBe(digestOf(value))
      }),
      { numRuns: 300 }
    )
  })

  it("handles what RFC 8785 singles out: key order by UTF-16 code units, escapes, numbers", () => {
    const value = { "\u20ac": 1, "\r": 2, "\ud83d\ude00": 3, "\ufb33": 4, a: [1e21, 1e-7, -0, 0.1, 255, "\u0000\u001f\"\\/\u2028"], b: null }
    expect(web.canonicalJson(value)).toBe(canonicalJson(value))
    expect(() => web.canonicalJson({ a: "\ud800" })).toThrow()
    expect(() => canonicalJson({ a: "\ud800" })).toThrow()
    expect(() => web.canonicalJson(Number.NaN)).toThrow()
  })
})

describe("the page's crypto answers as node:crypto does", () => {
  const signer = privateKeyFromSeed(Buffer.alloc(32, 7))
  const raw = new Uint8Array(Buffer.from(testSigner.jwk.x, "base64url"))

  it("SHA-256 of any bytes, and whether any 32 bytes are a usable Ed25519 key (property)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 200 }), fc.uint8Array({ minLength: 32, maxLength: 32 }), async (data, key) => {
        expect(await web.webCrypto.sha256(data)).toEqual(new Uint8Array(nodeCrypto.sha256(data)))
        expect(await web.webCrypto.ed25519Key(key)).toBe(nodeCrypto.ed25519Key(key))
      }),
      { numRuns: 300 }
    )
  })

  it("the same Ed25519 verdict for good, altered and foreign signatures, and for odd keys (property)", async () => {
    const message = Buffer.from("pv-receipt-v1\n" + "a".repeat(64))
    const good = new Uint8Array(sign(null, message, signer))
    const key = new Uint8Array(Buffer.from(verifierKeyOfSigner("k", signer).split("+")[2]!, "base64").subarray(1))
    const oddKeys = [raw, key, new Uint8Array(32), Uint8Array.of(1, ...new Uint8Array(31)), new Uint8Array(32).fill(0xff)]
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: oddKeys.length - 1 }), fc.nat({ max: 63 }), fc.nat({ max: 255 }), fc.boolean(), async (k, at, byte, alter) => {
        const signature = good.slice()
        if (alter) signature[at] = byte
        const publicKey = oddKeys[k]!
        expect(await web.webCrypto.ed25519Verify(publicKey, message, signature)).toBe(nodeCrypto.ed25519Verify(publicKey, message, signature))
      }),
      { numRuns: 300 }
    )
    expect(await web.webCrypto.ed25519Verify(key, message, good)).toBe(true)
    expect(await web.webCrypto.ed25519Verify(key, message, good.subarray(1))).toBe(false)
  })
})

/** Ways to damage a feed: each leaves a chain the service's verifier refuses somewhere, or not at all. */
type Tamper = (events: Array<any>, at: number) => void

const tampers: ReadonlyArray<readonly [string, Tamper]> = [
  ["none", () => undefined],
  ["payload", (events, at) => (events[at].payload = { ...events[at].payload, tampered: true })],
  ["type", (events, at) => (events[at].type = "lifecycle.changed")],
  ["drop", (events, at) => events.splice(at, 1)],
  ["swap", (events, at) => at + 1 < events.length && ([events[at], events[at + 1]] = [events[at + 1], events[at]])],
  ["sequence", (events, at) => (events[at].sequence += 1)],
  ["link", (events, at) => (events[at].previousEventHash = "0".repeat(64))],
  ["hash", (events, at) => (events[at].eventHash = events[at].eventHash.replace(/^./, (c: string) => (c === "0" ? "1" : "0")))],
  ["sig", (events, at) => (events[at].signature.sig = events[at].signature.sig.replace(/^./, (c: string) => (c === "A" ? "B" : "A")))],
  ["short sig", (events, at) => (events[at].signature.sig = events[at].signature.sig.slice(1))],
  ["kid", (events, at) => (events[at].signature.kid = "0123456789abcdef")],
  ["public id", (events, at) => (events[at].public_id = "DET-V1-SOMEONE-ELSE")],
  ["malformed", (events, at) => delete events[at].occurred_at],
  ["not an object", (events, at) => (events[at] = "event")]
]

const chainItems = fc.array(
  fc.record({
    type: fc.constantFrom(...EventTypes),
    payload: jsonObject,
    other: fc.boolean()
  }),
  { minLength: 1, maxLength: 6 }
).map((items) => items.map(({ type, payload, other }): ChainItem => ({ type, payload: payload as ChainItem["payload"], signer: other ? otherSigner : testSigner })))

describe("the page's event chain verdicts agree with src/domain/EventVerify.ts", () => {
  it("event hashes are the service's recipe", async () => {
    const [event] = buildChain("DET-V1-WEB-0001", [{ type: "determination.recorded", payload: { fields: ["tier"], n: 1 } }]) as Array<TrustEvent>
    expect(await web.eventHashOf(overTheWire(event))).toBe(eventHashOf(event!))
    expect(await web.eventHashOf(overTheWire(event))).toBe(event!.eventHash)
  })

  it("same verdict, sequence, reason and detail for good and tampered chains (property)", async () => {
    const bothKeys = { keys: [testSigner.jwk, otherSigner.jwk] }
    await fc.assert(
      fc.asyncProperty(chainItems, fc.nat(), fc.integer({ min: 0, max: tampers.length - 1 }), fc.boolean(), fc.constantFrom("given", "none", "shorter"),
        async (items, pick, which, oneKey, headKind) => {
          const chain = overTheWire(buildChain("DET-V1-WEB-0001", items)) as Array<any>
          const head = headOf(chain)
          const [, tamper] = tampers[which]!
          tamper(chain, pick % chain.length)
          const jwks = oneKey ? testJwks : bothKeys
          const options: VerifyOptions = {
            publicId: "DET-V1-WEB-0001",
            ...(headKind === "given" ? { head } : headKind === "shorter" ? { head: { sequence: head.sequence - 1, eventHash: null } } : {})
          }
          const report = await web.verifyEventChain(chain, jwks, options)
          expect(withoutRows(report)).toEqual(verifyEventChain(chain, jwks, options))
          expect(report.events).toHaveLength(chain.length)
        }),
      { numRuns: 200 }
    )
  })

  it("marks only the changed event's hash when one payload changes", async () => {
    const chain = overTheWire(buildChain("DET-V1-WEB-0001", [0, 1, 2, 3].map((n) => ({ type: "determination.updated" as const, payload: { n } })))) as Array<any>
    chain[1].payload.n = 99
    const report = await web.verifyEventChain(chain, testJwks, { head: headOf(chain) })
    expect(report).toMatchObject({ ok: false, sequence: 2, reason: "hash-mismatch", verified: 1 })
    expect(report.events.map((e) => [e.hash_ok, e.link_ok, e.signature_ok])).toEqual([
      [true, true, true], [false, true, true], [true, true, true], [true, true, true]
    ])
  })
})

/** The checkpoint with one bit of its (first) signature flipped: still well-formed, no longer valid. */
const corruptSignature = (note: string) => {
  const lines = note.split("\n")
  const at = lines.findIndex((line) => line.startsWith("\u2014 "))
  const [dash, name, signature] = lines[at]!.split(" ")
  const bytes = Buffer.from(signature!, "base64")
  bytes[8] = bytes[8]! ^ 1
  lines[at] = `${dash} ${name} ${bytes.toString("base64")}`
  return lines.join("\n")
}

/**
 * A cosignature line (`— name base64(key ID ‖ timestamp ‖ Ed25519 signature)`) with one bit of its signature
 * flipped: the key ID and timestamp stay, so the line still names a pinned witness and only its signature fails.
 */
const corruptCosignature = (line: string) => {
  const [dash, name, blob] = line.replace(/\n$/, "").split(" ")
  const bytes = Buffer.from(blob!, "base64")
  bytes[4 + 8 + 10] = bytes[4 + 8 + 10]! ^ 1
  return `${dash} ${name} ${bytes.toString("base64")}\n`
}

/** Ways to damage a bundle; the service's verifier decides which step fails, the page must agree. */
const bundleTampers: ReadonlyArray<(bundle: any, log: TestLog) => void> = [
  () => undefined,
  (b) => (b.receipt.snapshot_payload.decision = "NOT_ACTIONABLE"),
  (b) => (b.receipt.decision = "NOT_ACTIONABLE"),
  (b) => delete b.receipt.tier,
  (b) => (b.receipt.receipt_digest = b.receipt.receipt_digest.replace(/^./, (c: string) => (c === "0" ? "1" : "0"))),
  (b) => (b.receipt.snapshot_payload = "x"),
  (b) => (b.log_entry.receipt_id = "rr_other"),
  (b) => (b.log_entry.extra = true),
  (b) => (b.log_entry = { type: "pv.log.event.v1", public_id: "DET-V1-LOG-0001", sequence: 1, eventHash: "1".repeat(64) }),
  (b) => (b.log_entry = "not an object"),
  (b) => (b.leaf_index += 1),
  (b) => (b.leaf_index = "9"),
  (b) => b.inclusion_path.length > 0 && (b.inclusion_path[0] = b.inclusion_path[0].replace(/^./, (c: string) => (c === "0" ? "1" : "0"))),
  (b) => b.inclusion_path.pop(),
  (b) => b.inclusion_path.push("a".repeat(64)),
  (b) => (b.inclusion_path = "nope"),
  (b) => (b.checkpoint = 42),
  (b, log) => (b.checkpoint = signCheckpoint({ origin, size: log.size, root: rootOf(log.size, log.subtree), extensions: [] }, noteSignerFromPrivateKey(origin, otherLogKey))),
  (b) => (b.checkpoint = corruptSignature(b.checkpoint)),
  (b) => (b.checkpoint = b.checkpoint.replace(/\n\n/, "\n")),
  (b) => (b.verifier_key = "garbage"),
  (b) => (b.verifier_key = verifierKeyOfSigner(origin, otherLogKey)),
  (b) => (b.receipt.signature = signReceiptDigest(b.receipt.receipt_digest, otherReceiptSigner)),
  (b) => (b.receipt.signature.sig = b.receipt.signature.sig.replace(/^./, (c: string) => (c === "A" ? "B" : "A"))),
  (b) => delete b.receipt.signature,
  (b) => (b.receipt_key = otherReceiptSigner.jwk)
]

/**
 * The logs the properties below draw (sizes 1 to 40), each built once (~1.5 ms, signatures included, where a run
 * verifies in ~7): a log of a given size is always the same (test/log/logs.ts), and every bundle is copied
 * (overTheWire) before a tamper changes it, so no run sees another's changes.
 */
const logs = new Map<number, TestLog>()
const logOf = (size: number): TestLog => {
  let log = logs.get(size)
  if (log === undefined) logs.set(size, log = buildLog(size))
  return log
}

const keyChoices: ReadonlyArray<{ readonly node: BundleVerifyOptions; readonly web: { receiptKeys?: unknown; verifierKey?: string } }> = [
  { node: { receiptKeys: receiptJwks, verifierKey: logVerifierKey }, web: { receiptKeys: receiptJwks, verifierKey: logVerifierKey } },
  { node: {}, web: {} },
  { node: { receiptKeys: { keys: [otherReceiptSigner.jwk] } }, web: { receiptKeys: { keys: [otherReceiptSigner.jwk] } } },
  {
    node: { receiptKeys: Buffer.from(receiptSigner.jwk.x, "base64url"), verifierKey: logVerifierKey },
    web: { receiptKeys: new Uint8Array(Buffer.from(receiptSigner.jwk.x, "base64url")), verifierKey: logVerifierKey }
  }
]

describe("the page's bundle verdicts agree with src/client/log.ts", () => {
  it("same verdict, failing step and details for good and tampered bundles (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 40 }), fc.nat(), fc.integer({ min: 0, max: bundleTampers.length - 1 }),
        fc.integer({ min: 0, max: keyChoices.length - 1 }), fc.boolean(),
        async (size, pick, which, keysAt, withReceiptKey) => {
          const log = logOf(size)
          const indexes = [...log.receipts.keys()]
          const bundle = overTheWire(bundleFor(log, indexes[pick % indexes.length]!, withReceiptKey))
          bundleTampers[which]!(bundle, log)
          const keys = keyChoices[keysAt]!
          const webVerdict = await web.verifyReceiptBundle(bundle, keys.web)
          expect(webVerdict).toEqual(verifyReceiptBundle(bundle, keys.node))
        }
      ),
      { numRuns: 250 }
    )
  })

  it("never throws and still agrees when any member is replaced by any JSON value (property)", async () => {
    const log = buildLog(12)
    const paths = [["receipt"], ["receipt", "snapshot_payload"], ["receipt", "signature"], ["receipt", "receipt_digest"], ["log_entry"],
      ["log_entry", "created_at"], ["leaf_index"], ["checkpoint"], ["inclusion_path"], ["verifier_key"], ["receipt_key"], []]
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: paths.length - 1 }), fc.jsonValue({ maxDepth: 2 }), async (at, value) => {
        const bundle = overTheWire(bundleFor(log, 9, true))
        const path = paths[at]!
        let replaced: any = bundle
        if (path.length === 0) replaced = value
        else {
          let parent = bundle
          for (const key of path.slice(0, -1)) parent = parent[key]
          parent[path[path.length - 1]!] = value
        }
        const options = { receiptKeys: receiptJwks, verifierKey: logVerifierKey }
        expect(await web.verifyReceiptBundle(replaced, options)).toEqual(verifyReceiptBundle(replaced, options))
      }),
      { numRuns: 200 }
    )
  })
})

describe("the page's witness checks agree with src/client/log.ts", () => {
  const w1 = cosignerFromPrivateKey("witness.test/w1", privateKeyFromSeed(Buffer.alloc(32, 41)))
  const w2 = cosignerFromPrivateKey("witness.test/w2", privateKeyFromSeed(Buffer.alloc(32, 42)))
  const stranger = cosignerFromPrivateKey("witness.test/w3", privateKeyFromSeed(Buffer.alloc(32, 43)))
  const now = 1_800_000_000
  const keyLists: ReadonlyArray<ReadonlyArray<string>> = [
    [w1.verifierKey, w2.verifierKey],
    [w1.verifierKey],
    [w2.verifierKey, stranger.verifierKey],
    [w1.verifierKey, "witness.test/w1+00000000+BAAA"],
    [logVerifierKey]
  ]

  it("same verdict, step and detail for cosigned, future-dated, corrupted and missing cosignatures (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 20 }),
        fc.subarray([0, 1]),
        fc.integer({ min: -120, max: 120 }),
        fc.boolean(),
        fc.integer({ min: 0, max: keyLists.length - 1 }),
        fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
        async (size, signers, skew, corrupt, keysAt, quorum) => {
          const log = logOf(size)
          const indexes = [...log.receipts.keys()]
          const bundle = overTheWire(bundleFor(log, indexes[0]!, true))
          const text = bundle.checkpoint.slice(0, bundle.checkpoint.indexOf("\n\n") + 1)
          let lines = signers.map((i) => [w1, w2][i]!.cosign(text, now + skew + i))
          if (corrupt && lines.length > 0) lines = [corruptCosignature(lines[0]!), ...lines.slice(1)]
          bundle.checkpoint = appendSignatureLines(bundle.checkpoint, lines)
          const options = { receiptKeys: receiptJwks, verifierKey: logVerifierKey, witnesses: keyLists[keysAt]!, nowSeconds: now, ...(quorum === undefined ? {} : { quorum }) }
          const expected = verifyReceiptBundle(bundle, options)
          expect(await web.verifyReceiptBundle(bundle, options)).toEqual(expected)
          expect(expected.steps.map((s) => s.step)).toContain("witness_cosignatures")
        }
      ),
      { numRuns: 200 }
    )
  })

  it("a bundle with both witnesses' valid lines passes; without pinned witnesses the step is absent", async () => {
    const log = buildLog(5)
    const bundle = overTheWire(bundleFor(log, [...log.receipts.keys()][0]!, true))
    const text = bundle.checkpoint.slice(0, bundle.checkpoint.indexOf("\n\n") + 1)
    bundle.checkpoint = appendSignatureLines(bundle.checkpoint, [w1.cosign(text, now), w2.cosign(text, now)])
    const options = { receiptKeys: receiptJwks, verifierKey: logVerifierKey, witnesses: [w1.verifierKey, w2.verifierKey], nowSeconds: now }
    const verdict = await web.verifyReceiptBundle(bundle, options)
    expect(verdict.ok).toBe(true)
    expect(verdict.steps.map((s) => s.step)).toEqual(["digest", "entry", "leaf", "inclusion", "checkpoint_signature", "witness_cosignatures", "receipt_signature"])
    expect((await web.verifyReceiptBundle(bundle, { receiptKeys: receiptJwks, verifierKey: logVerifierKey })).steps).toHaveLength(6)
  })
})
