import { Context, Effect, Layer } from "effect"
import { kidOf } from "../domain/EventChain.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"
import { type KeyOrigin, loadSigningKey, privateKeyFromSeed, rawPublicKeyOf } from "../platform/SigningKeys.js"
import { publicKeyText, type WebhookSigningKey } from "./Signature.js"

export const webhookKeyFileName = "webhook-signing-key.pem"

/** The fixed seed of the test webhook key: a deterministic `whpk_` key in tests. */
export const testWebhookSigningSeed = Buffer.alloc(32, 11)

/** The test webhook key as PKCS#8 PEM, passed the way an operator would (PV_WEBHOOK_SIGNING_KEY). */
export const testWebhookSigningKeyPem = (): string =>
  privateKeyFromSeed(testWebhookSigningSeed).export({ format: "pem", type: "pkcs8" }).toString()

export interface WebhookKeyShape extends WebhookSigningKey {
  readonly origin: KeyOrigin
}

const make: Effect.Effect<WebhookKeyShape, never, AppConfig | DatabaseMode> = Effect.gen(function*() {
  const config = yield* AppConfig
  const { key, origin } = yield* loadSigningKey({
    variable: "PV_WEBHOOK_SIGNING_KEY",
    configured: config.webhookSigningKey,
    fileName: webhookKeyFileName,
    signs: "v1a webhook deliveries",
    devEphemeralKeys: config.devEphemeralKeys
  }, yield* DatabaseMode)
  const signing = yield* Effect.try({
    try: () => {
      if (key.asymmetricKeyType !== "ed25519") throw new TypeError(`it is ${key.asymmetricKeyType ?? "a symmetric key"}, not Ed25519`)
      return { privateKey: key, publicKey: publicKeyText(key), kid: kidOf(rawPublicKeyOf(key)), origin }
    },
    catch: (error) => new Error(`PV_WEBHOOK_SIGNING_KEY is not a usable Ed25519 key: ${String((error as Error).message ?? error)}`)
  }).pipe(Effect.orDie)
  if (origin === "ephemeral") {
    yield* Effect.logWarning(
      `PV_DEV_EPHEMERAL_KEYS=true and PV_WEBHOOK_SIGNING_KEY is not set: v1a deliveries are signed with an ephemeral key ` +
        `(kid ${signing.kid}) for this process only; receivers holding another key will refuse them.`
    )
  }
  return signing
})

/**
 * The key that signs `v1a` webhook deliveries (Ed25519; docs/API.md §10.5), by the rule of every signing
 * key (platform/SigningKeys.ts): PV_WEBHOOK_SIGNING_KEY when set; generated once into the data directory in
 * embedded mode; required on PostgreSQL unless PV_DEV_EPHEMERAL_KEYS=true. Its `kid` is derived as the
 * event keys' (first 16 hex of SHA-256 of the raw public key).
 */
export class WebhookKey extends Context.Service<WebhookKey, WebhookKeyShape>()("pv/WebhookKey", { make }) {
  static readonly layer = Layer.effect(this, make)
}
