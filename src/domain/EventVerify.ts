import { createPublicKey, type KeyObject } from "node:crypto"
import { base64UrlOf } from "../verify/Bytes.js"
import { checkEventChain, rawKeysFromJwks, type ChainVerdict, type VerifyOptions } from "../verify/Chain.js"
import { verifySync } from "../verify/NodeCrypto.js"

/**
 * A consumer's check of an event feed: every sequence, every link, every hash and every signature,
 * against the published JWKS. Pure (no I/O): give it the events and keys you fetched or saved. The
 * checks are src/verify/Chain.ts's, run here with node:crypto and in the page with WebCrypto.
 */

export type { ChainFailureReason, ChainVerdict, VerifyOptions } from "../verify/Chain.js"

/**
 * Keys by kid. A key whose stated kid is not the kid of its own `x` is left out, so it can never
 * vouch for an event.
 */
export const keysFromJwks = (jwks: unknown): ReadonlyMap<string, KeyObject> => {
  const keys = new Map<string, KeyObject>()
  for (const [kid, raw] of verifySync(rawKeysFromJwks(jwks))) {
    keys.set(kid, createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: base64UrlOf(raw) }, format: "jwk" }))
  }
  return keys
}

/**
 * Checks, in order, for each event: its shape, its sequence (one more than the previous), its link
 * (previousEventHash = the previous eventHash), its hash (recomputed by the recipe), its signature
 * (by a JWKS key, over the raw hash bytes); then that the chain ends at `head` when one is given.
 * Reports the first failure: a changed payload is a hash mismatch at that event, a removed or
 * reordered event a sequence mismatch at the first missing sequence.
 */
export const verifyEventChain = (events: ReadonlyArray<unknown>, jwks: unknown, options: VerifyOptions = {}): ChainVerdict =>
  verifySync(checkEventChain(events, jwks, options, false)).verdict
