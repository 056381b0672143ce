import { join } from "node:path"
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"
import { type KeyOrigin, loadSigningKey, privateKeyFromSeed } from "../platform/SigningKeys.js"
import { noteSignerFromPrivateKey, verifierKeyOfSigner, type NoteSigner } from "./Note.js"

export const logKeyFileName = "log-signing-key.pem"

/** Where embedded mode keeps its generated log key, beside the event key. */
export const logKeyFile = (dataDir: string) => join(dataDir, logKeyFileName)

/** Where this process's log key came from. */
export type LogKeyOrigin = KeyOrigin

/** The fixed seed of the test log key: deterministic verifier keys in tests. */
export const testLogSigningSeed = Buffer.alloc(32, 9)

/** The test log key as PKCS#8 PEM, passed the way an operator would (PV_LOG_SIGNING_KEY). */
export const testLogSigningKeyPem = (): string =>
  privateKeyFromSeed(testLogSigningSeed).export({ format: "pem", type: "pkcs8" }).toString()

/** The log's checkpoint key, where it came from, and its C2SP verifier key. */
export interface LogKeyShape {
  readonly origin: LogKeyOrigin
  /** The log's origin line (PV_LOG_ORIGIN). */
  readonly logOrigin: string
  readonly signer: NoteSigner
  /** `<name>+<key id>+<base64 key>`, as monitors and witnesses pin it. */
  readonly verifierKey: string
}

const makeLogKey: Effect.Effect<LogKeyShape, never, AppConfig | DatabaseMode> = Effect.gen(function*() {
  const config = yield* AppConfig
  const mode = yield* DatabaseMode
  const { key: privateKey, origin } = yield* loadSigningKey({
    variable: "PV_LOG_SIGNING_KEY",
    configured: config.logSigningKey,
    fileName: logKeyFileName,
    signs: "log checkpoints",
    devEphemeralKeys: config.devEphemeralKeys
  }, mode)
  const key = yield* Effect.try({
    try: () => ({
      origin: origin as LogKeyOrigin,
      logOrigin: config.logOrigin,
      signer: noteSignerFromPrivateKey(config.logOrigin, privateKey) as NoteSigner,
      verifierKey: verifierKeyOfSigner(config.logOrigin, privateKey)
    }),
    catch: (error) => new Error(`PV_LOG_SIGNING_KEY is not a usable Ed25519 key: ${String((error as Error).message ?? error)}`)
  }).pipe(Effect.orDie)
  if (origin !== "ephemeral") return key
  yield* Effect.logWarning(
    `PV_DEV_EPHEMERAL_KEYS=true and PV_LOG_SIGNING_KEY is not set: checkpoints are signed with an ephemeral key ` +
      `(${key.verifierKey}) for this process only; monitors pinned to another key will refuse them.`
  )
  return key
})

/**
 * The transparency log's checkpoint key (docs/API.md §11.3, §11.4), named after PV_LOG_ORIGIN:
 * - PV_LOG_SIGNING_KEY (Ed25519 PKCS#8 PEM) when set, in either mode;
 * - embedded mode: generated once into the data directory (0600), like the event key;
 * - PostgreSQL without it: the start is refused naming the variable (the config already refuses;
 *   this is the same rule where the key is made), unless PV_DEV_EPHEMERAL_KEYS=true.
 */
export class LogKey extends Context.Service<LogKey, LogKeyShape>()("pv/LogKey", { make: makeLogKey }) {
  static readonly layer = Layer.effect(this, makeLogKey)
}
