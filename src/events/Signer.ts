import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from "node:crypto"
import { Effect, Layer, Option, Redacted } from "effect"
import type { EventJwk } from "../domain/TrustEvent.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"
import { jwkOf } from "./EventChain.js"

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

const rawPublicKey = (privateKey: KeyObject): Buffer =>
  Buffer.from(createPublicKey(privateKey).export({ format: "jwk" }).x as string, "base64url")

export const signerFromPrivateKey = (privateKey: KeyObject, origin: SigningKeyOrigin): SignerShape => {
  if (privateKey.asymmetricKeyType !== "ed25519") {
    throw new TypeError(`the event-signing key must be Ed25519, not ${privateKey.asymmetricKeyType ?? "a symmetric key"}`)
  }
  const jwk = jwkOf(rawPublicKey(privateKey))
  return {
    kid: jwk.kid,
    jwk,
    origin,
    sign: (input) => sign(null, input, privateKey).toString("base64url")
  }
}

/** PKCS#8 DER of an Ed25519 private key is this fixed prefix followed by the 32-byte seed. */
const pkcs8Ed25519Prefix = Buffer.from("302e020100300506032b657004220420", "hex")

export const privateKeyFromSeed = (seed: Uint8Array): KeyObject => {
  if (seed.length !== 32) throw new TypeError("an Ed25519 seed is 32 bytes")
  return createPrivateKey({ key: Buffer.concat([pkcs8Ed25519Prefix, seed]), format: "der", type: "pkcs8" })
}

/** The fixed seed of the test signer: deterministic keys, kids and signatures in tests. */
export const testSigningSeed = Buffer.alloc(32, 7)

/** The test key as PKCS#8 PEM, for tests that pass it the way an operator would (PV_EVENT_SIGNING_KEY). */
export const testSigningKeyPem = (): string =>
  privateKeyFromSeed(testSigningSeed).export({ format: "pem", type: "pkcs8" }).toString()

/** Environments often flatten a PEM onto one line with literal `\n`: accept that too. */
const parsePem = (pem: string): KeyObject => createPrivateKey(pem.includes("\\n") ? pem.replace(/\\n/g, "\n") : pem)

/** Generated once, written 0600 with `wx` so two processes racing on one directory keep the first key. */
const dataDirKey = (dataDir: string): KeyObject => {
  const file = signingKeyFile(dataDir)
  if (!existsSync(file)) {
    const { privateKey } = generateKeyPairSync("ed25519")
    try {
      writeFileSync(file, privateKey.export({ format: "pem", type: "pkcs8" }), { mode: 0o600, flag: "wx" })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    }
  }
  chmodSync(file, 0o600)
  return createPrivateKey(readFileSync(file, "utf8"))
}

/**
 * The event-signing key (Ed25519):
 * - PV_EVENT_SIGNING_KEY (PKCS#8 PEM) when set, in either mode;
 * - embedded mode: generated once and kept in the data directory (mode 0600);
 * - DATABASE_URL mode without it: the start is refused, naming the variable (CONTRACT section 11), since
 *   a key per process would grow the JWKS at every restart and every worker. `PV_DEV_EPHEMERAL_KEYS=true`
 *   allows that for development: a key for this process only, with a warning (every public key is still
 *   recorded in the database, so events stay verifiable).
 */
export class Signer extends Effect.Service<Signer>()("pv/Signer", {
  effect: Effect.gen(function*() {
    const config = yield* AppConfig
    const mode = yield* DatabaseMode
    if (Option.isSome(config.eventSigningKey)) {
      const pem = Redacted.value(config.eventSigningKey.value)
      return yield* Effect.try({
        try: () => signerFromPrivateKey(parsePem(pem), "config"),
        catch: (error) => new Error(`PV_EVENT_SIGNING_KEY is not a usable Ed25519 PKCS#8 PEM key: ${String((error as Error).message ?? error)}`)
      }).pipe(Effect.orDie)
    }
    if (mode.kind === "embedded") {
      return signerFromPrivateKey(dataDirKey(mode.dataDir), "data-dir")
    }
    if (!config.devEphemeralKeys) {
      return yield* Effect.dieMessage(
        "PV_EVENT_SIGNING_KEY is not set. On PostgreSQL every instance must sign with the same configured key: " +
          "set PV_EVENT_SIGNING_KEY to an Ed25519 PKCS#8 PEM (openssl genpkey -algorithm ed25519), " +
          "or PV_DEV_EPHEMERAL_KEYS=true for a throw-away key per process in development."
      )
    }
    const signer = signerFromPrivateKey(generateKeyPairSync("ed25519").privateKey, "ephemeral")
    yield* Effect.logWarning(
      `PV_DEV_EPHEMERAL_KEYS=true and PV_EVENT_SIGNING_KEY is not set: events are signed with an ephemeral key (kid ${signer.kid}) for this process only. ` +
        "Set PV_EVENT_SIGNING_KEY to a PKCS#8 Ed25519 PEM for a stable key."
    )
    return signer
  })
}) {
  /** Deterministic signer from a 32-byte seed. */
  static readonly fromSeed = (seed: Uint8Array): Layer.Layer<Signer> =>
    Layer.succeed(Signer, Signer.make(signerFromPrivateKey(privateKeyFromSeed(seed), "seed")))

  /** The fixed-seed signer tests use. */
  static readonly Test: Layer.Layer<Signer> = Signer.fromSeed(testSigningSeed)
}
