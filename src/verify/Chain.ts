import { decodeBase64Url, HexHashPattern, isRecord } from "./Bytes.js"
import { jcsWithout } from "./FastJcs.js"
import { sha256Hex } from "./Jcs.js"
import { ed25519Key, eventCheck, type EventAnswer, type EventOp, type Verifying } from "./Run.js"

/**
 * A consumer's check of an event feed (docs/API.md, "Event chain"): every sequence, every link, every
 * hash and every signature, against the published JWKS. Pure: give it the events and keys you fetched.
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

export interface ChainHead {
  readonly sequence: number
  readonly eventHash: string | null
}

export type ChainVerdict =
  | {
    readonly ok: true
    /** Events checked. */
    readonly count: number
    /** The last verified event (sequence 0 and null for an empty chain). */
    readonly head: ChainHead
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
  readonly anchor?: ChainHead
  /**
   * The head the server reported. The chain must end exactly there, which is how an event removed
   * from the end is caught.
   */
  readonly head?: ChainHead
}

/**
 * One event as the page shows it: its own checks, each independent of the others, so every row says
 * what is wrong with that event even after the first failure.
 */
export interface EventCheck {
  readonly index: number
  readonly sequence: unknown
  readonly type: unknown
  readonly malformed: string | null
  readonly hash_ok: boolean
  readonly link_ok: boolean
  readonly signature_ok: boolean
  readonly kid: string | null
}

export const EventHashDomain = "pv-event-v1\n"
const Uncovered: ReadonlySet<string> = new Set(["eventHash", "signature"])

/** eventHash: SHA-256 hex of "pv-event-v1\n" + JCS(event without eventHash and signature). */
export function* eventHashOf(event: Readonly<Record<string, unknown>>): Verifying<string> {
  // One pass over the event, leaving the two members out, with `canonicalize`'s output and errors (FastJcs.ts).
  const covered = jcsWithout(event, Uncovered)
  if (covered === undefined) throw new TypeError("value has no canonical JSON form")
  return yield* sha256Hex(EventHashDomain + covered)
}

/** `kid` = first 16 hex of SHA-256 of the raw public key. */
export function* kidOf(rawPublicKey: Uint8Array): Verifying<string> {
  return (yield* sha256Hex(rawPublicKey)).slice(0, 16)
}

/**
 * Raw Ed25519 public keys by kid from a JWKS. A key whose stated kid is not the kid of its own `x` is
 * left out, so it can never vouch for anything; so is one the crypto provider refuses.
 */
export function* rawKeysFromJwks(jwks: unknown): Verifying<ReadonlyMap<string, Uint8Array>> {
  const keys = new Map<string, Uint8Array>()
  const list = isRecord(jwks) && Array.isArray(jwks.keys) ? jwks.keys : []
  for (const jwk of list) {
    if (!isRecord(jwk) || jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || typeof jwk.x !== "string" || typeof jwk.kid !== "string") continue
    const raw = decodeBase64Url(jwk.x)
    if (raw === undefined || raw.length !== 32 || (yield* kidOf(raw)) !== jwk.kid) continue
    if (yield* ed25519Key(raw)) keys.set(jwk.kid, raw)
  }
  return keys
}

export { signatureBytes } from "./Bytes.js"

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
  if (typeof event.eventHash !== "string" || !HexHashPattern.test(event.eventHash)) return "eventHash is not 64 lowercase hex"
  const signature = event.signature
  if (!isRecord(signature) || signature.alg !== "Ed25519" || typeof signature.kid !== "string" || typeof signature.sig !== "string") {
    return "signature is not { alg: \"Ed25519\", kid, sig }"
  }
  return null
}

interface WellFormedEvent {
  readonly sequence: number
  readonly public_id: string
  readonly previousEventHash: string | null
  readonly eventHash: string
  readonly signature: { readonly kid: string; readonly sig: string }
}

/**
 * Checks, in order, for each event: its shape, its sequence (one more than the previous), its link
 * (previousEventHash = the previous eventHash), its hash (recomputed by the recipe), its signature
 * (by a JWKS key, over the raw hash bytes); then that the chain ends at `head` when one is given.
 * The verdict is the first failure: a changed payload is a hash mismatch at that event, a removed or
 * reordered event a sequence mismatch at the first missing sequence. With `rows`, every event's own
 * checks are reported too (the page's table); without, checking stops at the first failure.
 */
export function* checkEventChain(
  events: ReadonlyArray<unknown>,
  jwks: unknown,
  options: VerifyOptions,
  rows: boolean
): Verifying<{ readonly verdict: ChainVerdict; readonly events: ReadonlyArray<EventCheck> }> {
  const keys = yield* rawKeysFromJwks(jwks)
  const anchor = options.anchor ?? { sequence: 0, eventHash: null }
  // Each event's hash and signature are computed at most once, whether for its row or for the verdict,
  // and together: one hand-off to the crypto provider per event, yielded here rather than through a
  // generator per event (the chain's hot path).
  const answers: Array<EventAnswer | undefined> = []
  const eventOp = (event: WellFormedEvent): EventOp => {
    // One pass over the event, leaving the two members out, with `canonicalize`'s output and errors (FastJcs.ts).
    const covered = jcsWithout(event as unknown as Record<string, unknown>, Uncovered)
    if (covered === undefined) throw new TypeError("value has no canonical JSON form")
    return eventCheck(EventHashDomain + covered, keys.get(event.signature.kid), event.eventHash, event.signature.sig)
  }

  const checks: Array<EventCheck> = []
  if (rows) {
    for (let index = 0; index < events.length; index++) {
      const candidate = events[index]
      const malformed = shapeProblem(candidate)
      const record = isRecord(candidate) ? candidate : {}
      const before = events[index - 1]
      const previous = index === 0 ? anchor : isRecord(before) ? before : {}
      const linked = malformed === null && Number.isSafeInteger(previous.sequence) && record.sequence === (previous.sequence as number) + 1 &&
        record.previousEventHash === previous.eventHash
      const event = candidate as WellFormedEvent
      let answer: EventAnswer | undefined
      if (malformed === null) answers[index] = answer = (yield eventOp(event)) as EventAnswer
      checks.push({
        index,
        sequence: record.sequence,
        type: record.type,
        malformed,
        hash_ok: answer !== undefined && answer.hash === event.eventHash,
        link_ok: linked,
        signature_ok: answer !== undefined && answer.signature,
        kid: malformed === null ? event.signature.kid : null
      })
    }
  }

  const kids = new Set<string>()
  let previous: ChainHead = anchor
  const fail = (sequence: number, reason: ChainFailureReason, detail: string) =>
    ({ verdict: { ok: false, sequence, reason, detail, verified: previous.sequence - anchor.sequence } as const, events: checks })
  // Indexed, not entries(): no [index, event] pair per event on the hot path.
  for (let index = 0; index < events.length; index++) {
    const candidate = events[index]
    const expected = previous.sequence + 1
    const problem = shapeProblem(candidate)
    if (problem !== null) return fail(expected, "malformed-event", problem)
    const event = candidate as WellFormedEvent
    if (options.publicId !== undefined && event.public_id !== options.publicId) {
      return fail(expected, "wrong-determination", `event belongs to ${String(event.public_id)}, not ${options.publicId}`)
    }
    if (event.sequence !== expected) {
      return fail(expected, "sequence-mismatch", `expected sequence ${expected}, found ${event.sequence}: an event is missing or out of order`)
    }
    if (event.previousEventHash !== previous.eventHash) {
      return fail(expected, "broken-link", `previousEventHash does not match the eventHash of sequence ${previous.sequence}`)
    }
    let answer = answers[index]
    if (answer === undefined) answer = (yield eventOp(event)) as EventAnswer
    if (answer.hash !== event.eventHash) {
      return fail(expected, "hash-mismatch", `eventHash ${event.eventHash} does not match the content (recomputed ${answer.hash})`)
    }
    if (!keys.has(event.signature.kid)) return fail(expected, "unknown-kid", `kid ${event.signature.kid} is not in the JWKS`)
    if (!answer.signature) return fail(expected, "bad-signature", `the signature does not verify with key ${event.signature.kid}`)
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
  return { verdict: { ok: true, count: previous.sequence - anchor.sequence, head: previous, kids: [...kids] }, events: checks }
}
