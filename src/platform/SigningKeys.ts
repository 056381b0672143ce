import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { createPrivateKey, generateKeyPairSync, type KeyObject } from "node:crypto"
import { Effect, Option, Redacted } from "effect"
import type { DatabaseModeShape } from "./Database.js"

/** Where a key came from: the logs and the banner say so. */
export type KeyOrigin = "config" | "data-dir" | "ephemeral"

/** PKCS#8 DER of an Ed25519 private key is this fixed prefix followed by the 32-byte seed. */
const pkcs8Ed25519Prefix = Buffer.from("302e020100300506032b657004220420", "hex")

export const privateKeyFromSeed = (seed: Uint8Array): KeyObject => {
  if (seed.length !== 32) throw new TypeError("an Ed25519 seed is 32 bytes")
  return createPrivateKey({ key: Buffer.concat([pkcs8Ed25519Prefix, seed]), format: "der", type: "pkcs8" })
}

/** The raw 32 bytes of an Ed25519 key's public half: with the verifiers, which the client loads without this module. */
export { rawPublicKeyOf } from "../verify/NodeCrypto.js"

/** Environments often flatten a PEM onto one line with literal `\n`: accept that too. */
const parsePem = (pem: string): KeyObject => createPrivateKey(pem.includes("\\n") ? pem.replace(/\\n/g, "\n") : pem)

/** Generated once, written 0600 with `wx` so two processes racing on one directory keep the first key. */
const dataDirKey = (file: string): KeyObject => {
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

export interface SigningKeySource {
  /** The environment variable that configures the key, named in every message. */
  readonly variable: string
  readonly configured: Option.Option<Redacted.Redacted>
  /** The file embedded mode keeps a generated key in, inside the data directory. */
  readonly fileName: string
  /** What the key signs, for the refusal message ("events and receipts", "log checkpoints"). */
  readonly signs: string
  readonly devEphemeralKeys: boolean
}

/**
 * One rule for every Ed25519 key the service signs with (docs/OPERATIONS.md, "Keys and credentials"): the configured
 * PKCS#8 PEM in either mode; in embedded mode, one generated once into the data directory (0600); on
 * PostgreSQL without one, the start is refused naming the variable (every instance must sign with the
 * same key), unless PV_DEV_EPHEMERAL_KEYS=true allows a throw-away key for this process.
 */
export const loadSigningKey = (
  source: SigningKeySource,
  mode: DatabaseModeShape
): Effect.Effect<{ readonly key: KeyObject; readonly origin: KeyOrigin }> => {
  if (Option.isSome(source.configured)) {
    const pem = Redacted.value(source.configured.value)
    return Effect.try({
      try: () => ({ key: parsePem(pem), origin: "config" as const }),
      catch: (error) => new Error(`${source.variable} is not a usable Ed25519 PKCS#8 PEM key: ${String((error as Error).message ?? error)}`)
    }).pipe(Effect.orDie)
  }
  if (mode.kind === "embedded") {
    return Effect.sync(() => ({ key: dataDirKey(join(mode.dataDir, source.fileName)), origin: "data-dir" as const }))
  }
  if (!source.devEphemeralKeys) {
    return Effect.die(new Error(
      `${source.variable} is not set. On PostgreSQL every instance must sign ${source.signs} with the same configured key: ` +
        `set ${source.variable} to an Ed25519 PKCS#8 PEM (openssl genpkey -algorithm ed25519), ` +
        "or PV_DEV_EPHEMERAL_KEYS=true for a throw-away key per process in development."
    ))
  }
  return Effect.sync(() => ({ key: generateKeyPairSync("ed25519").privateKey, origin: "ephemeral" as const }))
}
