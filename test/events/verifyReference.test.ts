import { createHash, verify } from "node:crypto"
import canonicalize from "canonicalize"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { EventTypes } from "../../src/domain/TrustEvent.js"
import { keysFromJwks, verifyEventChain, type ChainFailureReason, type ChainVerdict, type VerifyOptions } from "../../src/domain/EventVerify.js"
import { buildChain, headOf, otherSigner, testJwks, testSigner, type ChainItem } from "./chains.js"

/**
 * The verifier as it was before it was made fast, written straight from the recipe (docs/API.md §10.4)
 * with the general `canonicalize`, a hash per step and every check in full: the fast one must give the
 * same verdict, sequence, reason, detail and count for every feed, tampered or not.
 */
const DigestPattern = /^[0-9a-f]{64}$/u
const SignaturePattern = /^[A-Za-z0-9_-]{86}$/
const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const sha256Hex = (input: string) => createHash("sha256").update(input).digest("hex")

const shapeProblem = (event: unknown): string | null => {
  if (!isRecord(event)) return "the event is not an object"
  if (!Number.isSafeInteger(event.sequence)) return "sequence is not an integer"
  for (const field of ["event_id", "public_id", "type", "occurred_at"] as const) {
    if (typeof event[field] !== "string") return `${field} is not a string`
  }
  if (!isRecord(event.payload)) return "payload is not an object"
  if (event.previousEventHash !== null && typeof event.previousEventHash !== "string") {
    return "previousEventHash is neither null nor a string"
  }
  if (typeof event.eventHash !== "string" || !DigestPattern.test(event.eventHash)) return "eventHash is not 64 lowercase hex"
  const signature = event.signature
  if (!isRecord(signature) || signature.alg !== "Ed25519" || typeof signature.kid !== "string" || typeof signature.sig !== "string") {
    return "signature is not { alg: \"Ed25519\", kid, sig }"
  }
  return null
}

const referenceVerify = (events: ReadonlyArray<unknown>, jwks: unknown, options: VerifyOptions = {}): ChainVerdict => {
  const keys = keysFromJwks(jwks)
  const kids = new Set<string>()
  let previous = options.anchor ?? { sequence: 0, eventHash: null }
  const fail = (sequence: number, reason: ChainFailureReason, detail: string): ChainVerdict =>
    ({ ok: false, sequence, reason, detail, verified: previous.sequence - (options.anchor?.sequence ?? 0) })
  for (const candidate of events) {
    const expected = previous.sequence + 1
    const problem = shapeProblem(candidate)
    if (problem !== null) return fail(expected, "malformed-event", problem)
    const event = candidate as Record<string, any>
    if (options.publicId !== undefined && event.public_id !== options.publicId) {
      return fail(expected, "wrong-determination", `event belongs to ${String(event.public_id)}, not ${options.publicId}`)
    }
    if (event.sequence !== expected) {
      return fail(expected, "sequence-mismatch", `expected sequence ${expected}, found ${event.sequence}: an event is missing or out of order`)
    }
    if (event.previousEventHash !== previous.eventHash) {
      return fail(expected, "broken-link", `previousEventHash does not match the eventHash of sequence ${previous.sequence}`)
    }
    const { eventHash: _h, signature: _s, ...covered } = event
    const recomputed = sha256Hex("pv-event-v1\n" + canonicalize(covered)!)
    if (recomputed !== event.eventHash) {
      return fail(expected, "hash-mismatch", `eventHash ${event.eventHash} does not match the content (recomputed ${recomputed})`)
    }
    const key = keys.get(event.signature.kid)
    if (key === undefined) return fail(expected, "unknown-kid", `kid ${event.signature.kid} is not in the JWKS`)
    const sig: string = event.signature.sig
    const signatureBytes = Buffer.from(sig, "base64url")
    const valid = SignaturePattern.test(sig) && signatureBytes.toString("base64url") === sig &&
      verify(null, Buffer.from(event.eventHash, "hex"), key, signatureBytes)
    if (!valid) return fail(expected, "bad-signature", `the signature does not verify with key ${event.signature.kid}`)
    kids.add(event.signature.kid)
    previous = { sequence: expected, eventHash: event.eventHash }
  }
  const head = options.head
  if (head !== undefined && (head.sequence !== previous.sequence || head.eventHash !== previous.eventHash)) {
    if (head.sequence > previous.sequence) {
      return fail(previous.sequence + 1, "head-mismatch", `the chain ends at ${previous.sequence} but the head is ${head.sequence}: events are missing`)
    }
    return head.sequence < previous.sequence
      ? fail(head.sequence + 1, "head-mismatch", `the chain runs past the head (${head.sequence}) to ${previous.sequence}`)
      : fail(head.sequence, "head-mismatch", `the head's eventHash ${String(head.eventHash)} is not the eventHash of sequence ${head.sequence}`)
  }
  return { ok: true, count: previous.sequence - (options.anchor?.sequence ?? 0), head: previous, kids: [...kids] }
}

/** A verdict, or the message thrown (content with no JCS form throws in both). */
const outcome = (f: () => ChainVerdict): ChainVerdict | { thrown: string } => {
  try {
    return f()
  } catch (error) {
    return { thrown: String((error as Error).message) }
  }
}

type Tamper = (events: Array<any>, at: number) => void

const lastChar = (s: string, c: string) => s.slice(0, -1) + c

// Besides the usual damage, the ones the fast path treats specially: an eventHash that is not 64
// lowercase hex (alone and with a later failure in the same event), and a signature whose last
// character is not the one canonical spelling.
const tampers: ReadonlyArray<Tamper> = [
  () => undefined,
  (events, at) => (events[at].payload = { ...events[at].payload, tampered: "é😀" }),
  (events, at) => events.splice(at, 1),
  (events, at) => at + 1 < events.length && ([events[at], events[at + 1]] = [events[at + 1], events[at]]),
  (events, at) => (events[at].sequence += 1),
  (events, at) => (events[at].previousEventHash = "0".repeat(64)),
  (events, at) => (events[at].eventHash = events[at].eventHash.toUpperCase()),
  (events, at) => (events[at].eventHash = events[at].eventHash.slice(1)),
  (events, at) => (events[at].eventHash = 7),
  (events, at) => ((events[at].eventHash = events[at].eventHash.toUpperCase()), (events[at].sequence += 1)),
  (events, at) => ((events[at].eventHash = "x"), (events[at].public_id = "DET-V1-SOMEONE-ELSE")),
  (events, at) => ((events[at].eventHash = "x"), (events[at].signature = { alg: "Ed25519" })),
  (events, at) => ((events[at].eventHash = "X".repeat(64)), (events[at].signature.kid = "0123456789abcdef")),
  (events, at) => (events[at].signature.sig = lastChar(events[at].signature.sig, "B")),
  (events, at) => (events[at].signature.sig = lastChar(events[at].signature.sig, "Q")),
  (events, at) => (events[at].signature.sig = events[at].signature.sig.replace(/^./, "+")),
  (events, at) => (events[at].signature.sig = events[at].signature.sig.slice(1)),
  (events, at) => (events[at].signature.kid = "0123456789abcdef"),
  (events, at) => (events[at].public_id = "DET-V1-SOMEONE-ELSE"),
  (events, at) => delete events[at].occurred_at,
  (events, at) => (events[at].extra = { b: [1, -0, 1e21], a: "\u2028" }),
  (events, at) => (events[at].payload = { lone: "\ud800" }),
  (events, at) => ((events[at].payload = { lone: "\udc00" }), (events[at].eventHash = "x")),
  (events, at) => (events[at] = "event")
]

const leaf = fc.oneof(fc.string({ maxLength: 8 }), fc.fullUnicodeString({ maxLength: 4 }), fc.integer(), fc.boolean(), fc.constant(null))
const payload = fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(leaf, fc.array(leaf, { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 4 }), leaf, { maxKeys: 3 })), { maxKeys: 5 })
const chainItems = fc.array(fc.record({ type: fc.constantFrom(...EventTypes), payload, other: fc.boolean() }), { minLength: 1, maxLength: 6 })
  .map((items) => items.map(({ type, payload, other }): ChainItem => ({ type, payload, signer: other ? otherSigner : testSigner })))

describe("the fast verifier gives the reference verifier's verdicts", () => {
  it("same verdict, sequence, reason, detail and count for good and tampered feeds (property)", () => {
    const bothKeys = { keys: [testSigner.jwk, otherSigner.jwk] }
    fc.assert(
      fc.property(chainItems, fc.array(fc.tuple(fc.nat(), fc.nat({ max: tampers.length - 1 })), { maxLength: 2 }), fc.boolean(), fc.constantFrom("given", "none", "shorter"),
        (items, damage, oneKey, headKind) => {
          const chain = JSON.parse(JSON.stringify(buildChain("DET-V1-REF-0001", items))) as Array<any>
          const head = headOf(chain)
          for (const [pick, which] of damage) {
            try {
              tampers[which]!(chain, pick % Math.max(1, chain.length))
            } catch {
              // A second tamper that finds the event already broken in its own way leaves it so.
            }
          }
          const options: VerifyOptions = {
            publicId: "DET-V1-REF-0001",
            ...(headKind === "given" ? { head } : headKind === "shorter" ? { head: { sequence: head.sequence - 1, eventHash: null } } : {})
          }
          const jwks = oneKey ? testJwks : bothKeys
          expect(outcome(() => verifyEventChain(chain, jwks, options))).toEqual(outcome(() => referenceVerify(chain, jwks, options)))
        }),
      { numRuns: 1500 }
    )
  })
})
