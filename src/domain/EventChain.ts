import { hash } from "node:crypto"
import { DigestPattern, sha256Hex } from "./Canonical.js"
import { jcsWithout } from "../verify/FastJcs.js"
import type { EventJwk, TrustEvent, UnsignedEvent } from "./TrustEvent.js"

/**
 * The one home of the event-hash recipe (docs/API.md §10.4), used by the service when it appends and
 * by every verifier: eventHash = SHA-256 hex of UTF-8 "pv-event-v1\n" + JCS(event without eventHash
 * and signature); the signature covers the 32 raw bytes of eventHash.
 */
export const EventHashDomain = "pv-event-v1\n"

const Uncovered: ReadonlySet<string> = new Set(["eventHash", "signature"])

const hashInput = (event: UnsignedEvent | Readonly<Record<string, unknown>>): string => {
  const text = jcsWithout(event as Readonly<Record<string, unknown>>, Uncovered)
  if (text === undefined) throw new TypeError("value has no canonical JSON form")
  return EventHashDomain + text
}

/** Hash of any event-shaped object: `eventHash` and `signature` are left out, every other member counts. */
export const eventHashOf = (event: UnsignedEvent | Readonly<Record<string, unknown>>): string => hash("sha256", hashInput(event), "hex")

/** The bytes an event signature covers: the 32 raw bytes of the hex eventHash. */
export const signingInputOf = (eventHash: string): Uint8Array => {
  if (!DigestPattern.test(eventHash)) throw new TypeError("eventHash must be 64 lowercase hex characters")
  return Buffer.from(eventHash, "hex")
}

/** `kid` = first 16 hex of SHA-256 of the raw 32-byte Ed25519 public key. */
export const kidOf = (rawPublicKey: Uint8Array): string => sha256Hex(rawPublicKey).slice(0, 16)

/** The JWKS entry for a raw Ed25519 public key. */
export const jwkOf = (rawPublicKey: Uint8Array): EventJwk => ({
  kty: "OKP",
  crv: "Ed25519",
  x: Buffer.from(rawPublicKey).toString("base64url"),
  kid: kidOf(rawPublicKey),
  use: "sig",
  alg: "Ed25519"
})

/** What sealing needs from a key: its id and a signature (base64url, no padding) over given bytes. */
export interface EventSigningKey {
  readonly kid: string
  readonly sign: (input: Uint8Array) => string
}

/** Hash and sign an event: the only way an event gets its `eventHash` and `signature`. */
export const sealEvent = (unsigned: UnsignedEvent, key: EventSigningKey): TrustEvent => {
  const eventHash = eventHashOf(unsigned)
  return {
    ...unsigned,
    eventHash,
    signature: { alg: "Ed25519", kid: key.kid, sig: key.sign(signingInputOf(eventHash)) }
  }
}
