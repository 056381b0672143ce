import { join } from "node:path"
import { sign, type KeyObject } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import type { EventJwk } from "../domain/TrustEvent.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"
import { loadSigningKey, privateKeyFromSeed, rawPublicKeyOf } from "../platform/SigningKeys.js"
import { jwkOf } from "../domain/EventChain.js"

export const signingKeyFileName = "event-signing-key.pem"

/** Where embedded mode keeps its generated event-signing key. */
export const signingKeyFile = (dataDir: string) => join(dataDir, signingKeyFileName)

/** Where this process's key came from: the banner and the logs say so. */
export type SigningKeyOrigin = "config" | "data-dir" | "ephemeral" | "seed"

export interface SignerShape {
  readonly kid: string
  readonly jwk: EventJwk
  readonly origin: SigningKeyOrigin
  /** Ed25519 over `input`, base64url without padding. */
  readonly sign: (input: Uint8Array) => string
}

export const signerFromPrivateKey = (privateKey: KeyObject, origin: SigningKeyOrigin): SignerShape => {
  if (privateKey.asymmetricKeyType !== "ed25519") {
    throw new TypeError(`the event-signing key must be Ed25519, not ${privateKey.asymmetricKeyType ?? "a symmetric key"}`)
  }
  const jwk = jwkOf(rawPublicKeyOf(privateKey))
  return {
    kid: jwk.kid,
    jwk,
    origin,
    sign: (input) => sign(null, input, privateKey).toString("base64url")
  }
}

export { privateKeyFromSeed }

/** The fixed seed of the test signer: deterministic keys, kids and signatures in tests. */
export const testSigningSeed = Buffer.alloc(32, 7)

/** The test key as PKCS#8 PEM, for tests that pass it the way an operator would (PV_EVENT_SIGNING_KEY). */
export const testSigningKeyPem = (): string =>
  privateKeyFromSeed(testSigningSeed).export({ format: "pem", type: "pkcs8" }).toString()

const make = Effect.gen(function*() {
  const config = yield* AppConfig
  const mode = yield* DatabaseMode
  const { key, origin } = yield* loadSigningKey({
    variable: "PV_EVENT_SIGNING_KEY",
    configured: config.eventSigningKey,
    fileName: signingKeyFileName,
    signs: "events and receipts",
    devEphemeralKeys: config.devEphemeralKeys
  }, mode)
  const signer = yield* Effect.try({
    try: () => signerFromPrivateKey(key, origin),
    catch: (error) => new Error(`PV_EVENT_SIGNING_KEY is not a usable Ed25519 key: ${String((error as Error).message ?? error)}`)
  }).pipe(Effect.orDie)
  if (origin !== "ephemeral") return signer
  yield* Effect.logWarning(
    `PV_DEV_EPHEMERAL_KEYS=true and PV_EVENT_SIGNING_KEY is not set: events are signed with an ephemeral key (kid ${signer.kid}) for this process only. ` +
      "Set PV_EVENT_SIGNING_KEY to a PKCS#8 Ed25519 PEM for a stable key."
  )
  return signer
})

/**
 * The event-signing key (Ed25519):
 * - PV_EVENT_SIGNING_KEY (PKCS#8 PEM) when set, in either mode;
 * - embedded mode: generated once and kept in the data directory (mode 0600);
 * - DATABASE_URL mode without it: the start is refused, naming the variable (docs/API.md §14), since
 *   a key per process would grow the JWKS at every restart and every worker. `PV_DEV_EPHEMERAL_KEYS=true`
 *   allows that for development: a key for this process only, with a warning (every public key is still
 *   recorded in the database, so events stay verifiable).
 */
export class Signer extends Context.Service<Signer, SignerShape>()("pv/Signer", { make }) {
  static readonly layer = Layer.effect(Signer, make)

  /** Deterministic signer from a 32-byte seed. */
  static readonly fromSeed = (seed: Uint8Array): Layer.Layer<Signer> =>
    Layer.succeed(Signer, signerFromPrivateKey(privateKeyFromSeed(seed), "seed"))

  /** The fixed-seed signer tests use. */
  static readonly Test: Layer.Layer<Signer> = Signer.fromSeed(testSigningSeed)
}
