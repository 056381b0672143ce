import { createPublicKey, verify, type KeyObject } from "node:crypto"
import { DigestPattern } from "./Canonical.js"
import { eventHashOf, kidOf } from "./EventChain.js"

/**
 * A consumer's check of an event feed: every sequence, every link, every hash and every signature,
 * against the published JWKS. Pure (no I/O): give it the events and keys you fetched or saved.
 */

export type ChainFailureReason =
  | "malformed-event"
  | "wrong-determination"
  | "sequence-mismatch"
  | "broken-link"
  | "hash-mismatch"
  | "unknown-kid"
  | "bad-signature"
  | "head-mismatch"

export type ChainVerdict =
  | {
    readonly ok: true
    /** Events checked. */
    readonly count: number
    /** The last verified event (sequence 0 and null for an empty chain). */
    readonly head: { readonly sequence: number; readonly eventHash: string | null }
    readonly kids: ReadonlyArray<string>
  }
  | {
    readonly ok: false
    /** The first sequence at which the chain is not what it claims to be. */
    readonly sequence: number
    readonly reason: ChainFailureReason
    readonly detail: string
    /** Events before the failure that did verify. */
    readonly verified: number
  }

export interface VerifyOptions {
  /** Every event must belong to this determination. */
  readonly publicId?: string
  /**
   * Where the given events start: the event just before them. Default: the genesis (sequence 0, no hash),
   * so the first event must be sequence 1 with previousEventHash null.
   */
  readonly anchor?: { readonly sequence: number; readonly eventHash: string | null }
  /**
   * The head the server reported. The chain must end exactly there, which is how an event removed
   * from the end is caught.
   */
  readonly head?: { readonly sequence: number; readonly eventHash: string | null }
}

// 64 bytes are 86 base64url characters whose last one carries 2 bits and 4 zero bits (A, Q, g or w):
// the one spelling that decodes to the bytes and encodes back to itself.
const SignaturePattern = /^[A-Za-z0-9_-]{85}[AQgw]$/

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Keys by kid. A key whose stated kid is not the kid of its own `x` is left out, so it can never
 * vouch for an event.
 */
export const keysFromJwks = (jwks: unknown): ReadonlyMap<string, KeyObject> => {
  const keys = new Map<string, KeyObject>()
  const list = isRecord(jwks) && Array.isArray(jwks.keys) ? jwks.keys : []
  for (const jwk of list) {
    if (!isRecord(jwk) || jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || typeof jwk.x !== "string" || typeof jwk.kid !== "string") {
      continue
    }
    const raw = Buffer.from(jwk.x, "base64url")
    if (raw.length !== 32 || raw.toString("base64url") !== jwk.x || kidOf(raw) !== jwk.kid) continue
    try {
      keys.set(jwk.kid, createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: jwk.x }, format: "jwk" }))
    } catch {
      // Not a usable Ed25519 point: the key vouches for nothing.
    }
  }
  return keys
}

const StringFields = ["event_id", "public_id", "type", "occurred_at"] as const

/**
 * What is wrong with the event's shape, if anything. `checkDigest: false` leaves out only the eventHash
 * pattern, for the chain's happy path: there the recomputed hash equals eventHash, which proves the
 * pattern, and every failure path asks again with it.
 */
const shapeProblem = (event: unknown, checkDigest = true): string | null => {
  if (!isRecord(event)) return "the event is not an object"
  if (!Number.isSafeInteger(event.sequence)) return "sequence is not an integer"
  for (const field of StringFields) {
    if (typeof event[field] !== "string") return `${field} is not a string`
  }
  if (!isRecord(event.payload)) return "payload is not an object"
  if (event.previousEventHash !== null && typeof event.previousEventHash !== "string") {
    return "previousEventHash is neither null nor a string"
  }
  if (typeof event.eventHash !== "string" || (checkDigest && !DigestPattern.test(event.eventHash))) return "eventHash is not 64 lowercase hex"
  const signature = event.signature
  if (!isRecord(signature) || signature.alg !== "Ed25519" || typeof signature.kid !== "string" || typeof signature.sig !== "string") {
    return "signature is not { alg: \"Ed25519\", kid, sig }"
  }
  return null
}

/**
 * Checks, in order, for each event: its shape, its sequence (one more than the previous), its link
 * (previousEventHash = the previous eventHash), its hash (recomputed by the recipe), its signature
 * (by a JWKS key, over the raw hash bytes); then that the chain ends at `head` when one is given.
 * Reports the first failure: a changed payload is a hash mismatch at that event, a removed or
 * reordered event a sequence mismatch at the first missing sequence.
 */
export const verifyEventChain = (events: ReadonlyArray<unknown>, jwks: unknown, options: VerifyOptions = {}): ChainVerdict => {
  const keys = keysFromJwks(jwks)
  const kids = new Set<string>()
  // verify() is synchronous, so one pair of buffers serves every event: no allocation per signature.
  const digestBytes = Buffer.alloc(32)
  const signatureBytes = Buffer.alloc(64)
  let previous = options.anchor ?? { sequence: 0, eventHash: null }
  const fail = (sequence: number, reason: ChainFailureReason, detail: string): ChainVerdict =>
    ({ ok: false, sequence, reason, detail, verified: previous.sequence - (options.anchor?.sequence ?? 0) })
  // Past the quick shape check a failure is the first the full order finds, and a malformed eventHash
  // comes before all of them.
  const failAfterShape = (event: Record<string, any>, sequence: number, reason: ChainFailureReason, detail: string): ChainVerdict =>
    DigestPattern.test(event.eventHash)
      ? fail(sequence, reason, detail)
      : fail(sequence, "malformed-event", "eventHash is not 64 lowercase hex")

  for (const candidate of events) {
    const expected = previous.sequence + 1
    if (shapeProblem(candidate, false) !== null) return fail(expected, "malformed-event", shapeProblem(candidate)!)
    const event = candidate as Record<string, any>
    if (options.publicId !== undefined && event.public_id !== options.publicId) {
      return failAfterShape(event, expected, "wrong-determination", `event belongs to ${String(event.public_id)}, not ${options.publicId}`)
    }
    if (event.sequence !== expected) {
      return failAfterShape(event, expected, "sequence-mismatch", `expected sequence ${expected}, found ${event.sequence}: an event is missing or out of order`)
    }
    if (event.previousEventHash !== previous.eventHash) {
      return failAfterShape(event, expected, "broken-link", `previousEventHash does not match the eventHash of sequence ${previous.sequence}`)
    }
    let recomputed: string
    try {
      recomputed = eventHashOf(event)
    } catch (error) {
      // Content with no JCS form (a lone surrogate) throws, as it always has, unless the eventHash
      // was malformed, which the full shape check reports first.
      if (!DigestPattern.test(event.eventHash)) return fail(expected, "malformed-event", "eventHash is not 64 lowercase hex")
      throw error
    }
    if (recomputed !== event.eventHash) {
      return failAfterShape(event, expected, "hash-mismatch", `eventHash ${event.eventHash} does not match the content (recomputed ${recomputed})`)
    }
    // From here eventHash is the recomputed hex, so its bytes are the recomputed digest's.
    const key = keys.get(event.signature.kid)
    if (key === undefined) return fail(expected, "unknown-kid", `kid ${event.signature.kid} is not in the JWKS`)
    const sig: string = event.signature.sig
    // 64 lowercase hex characters are 32 bytes and 86 pattern-checked base64url characters 64.
    const valid = SignaturePattern.test(sig) && digestBytes.write(recomputed, "hex") === 32 &&
      signatureBytes.write(sig, "base64url") === 64 && verify(null, digestBytes, key, signatureBytes)
    if (!valid) return fail(expected, "bad-signature", `the signature does not verify with key ${event.signature.kid}`)
    kids.add(event.signature.kid)
    previous = { sequence: expected, eventHash: recomputed }
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
  return {
    ok: true,
    count: previous.sequence - (options.anchor?.sequence ?? 0),
    head: previous,
    kids: [...kids]
  }
}
