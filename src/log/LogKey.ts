import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { createPrivateKey, generateKeyPairSync, type KeyObject } from "node:crypto"
import { Effect, Option, Redacted } from "effect"
import { privateKeyFromSeed } from "../events/Signer.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"
import { noteSignerFromPrivateKey, verifierKeyOfSigner, type NoteSigner } from "./Note.js"

export const logKeyFileName = "log-signing-key.pem"

/** Where embedded mode keeps its generated log key, beside the event key. */
export const logKeyFile = (dataDir: string) => join(dataDir, logKeyFileName)

/** Where this process's log key came from. */
export type LogKeyOrigin = "config" | "data-dir" | "ephemeral"

/** The fixed seed of the test log key: deterministic verifier keys in tests. */
export const testLogSigningSeed = Buffer.alloc(32, 9)

/** The test log key as PKCS#8 PEM, passed the way an operator would (PV_LOG_SIGNING_KEY). */
export const testLogSigningKeyPem = (): string =>
  privateKeyFromSeed(testLogSigningSeed).export({ format: "pem", type: "pkcs8" }).toString()

/** Environments often flatten a PEM onto one line with literal `\n`: accept that too. */
const parsePem = (pem: string): KeyObject => createPrivateKey(pem.includes("\\n") ? pem.replace(/\\n/g, "\n") : pem)

/** Generated once, written 0600 with `wx` so two processes racing on one directory keep the first key. */
const dataDirKey = (dataDir: string): KeyObject => {
  const file = logKeyFile(dataDir)
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
 * The transparency log's checkpoint key (contract section 10), named after PV_LOG_ORIGIN:
 * - PV_LOG_SIGNING_KEY (Ed25519 PKCS#8 PEM) when set, in either mode;
 * - embedded mode: generated once into the data directory (0600), like the event key;
 * - PostgreSQL without it: the start is refused naming the variable (the config already refuses;
 *   this is the same rule where the key is made), unless PV_DEV_EPHEMERAL_KEYS=true.
 */
export class LogKey extends Effect.Service<LogKey>()("pv/LogKey", {
  effect: Effect.gen(function*() {
    const config = yield* AppConfig
    const mode = yield* DatabaseMode
    const make = (privateKey: KeyObject, origin: LogKeyOrigin) =>
      Effect.try({
        try: () => ({
          origin,
          logOrigin: config.logOrigin,
          signer: noteSignerFromPrivateKey(config.logOrigin, privateKey) as NoteSigner,
          verifierKey: verifierKeyOfSigner(config.logOrigin, privateKey)
        }),
        catch: (error) => new Error(`PV_LOG_SIGNING_KEY is not a usable Ed25519 key: ${String((error as Error).message ?? error)}`)
      }).pipe(Effect.orDie)
    if (Option.isSome(config.logSigningKey)) {
      const pem = Redacted.value(config.logSigningKey.value)
      const key = yield* Effect.try({
        try: () => parsePem(pem),
        catch: (error) => new Error(`PV_LOG_SIGNING_KEY is not a usable Ed25519 PKCS#8 PEM key: ${String((error as Error).message ?? error)}`)
      }).pipe(Effect.orDie)
      return yield* make(key, "config")
    }
    if (mode.kind === "embedded") return yield* make(dataDirKey(mode.dataDir), "data-dir")
    if (!config.devEphemeralKeys) {
      return yield* Effect.dieMessage(
        "PV_LOG_SIGNING_KEY is not set. On PostgreSQL every instance must sign checkpoints with the same configured key: " +
          "set PV_LOG_SIGNING_KEY to an Ed25519 PKCS#8 PEM (openssl genpkey -algorithm ed25519), " +
          "or PV_DEV_EPHEMERAL_KEYS=true for a throw-away key per process in development."
      )
    }
    const key = yield* make(generateKeyPairSync("ed25519").privateKey, "ephemeral")
    yield* Effect.logWarning(
      `PV_DEV_EPHEMERAL_KEYS=true and PV_LOG_SIGNING_KEY is not set: checkpoints are signed with an ephemeral key ` +
        `(${key.verifierKey}) for this process only; monitors pinned to another key will refuse them.`
    )
    return key
  })
}) {}
