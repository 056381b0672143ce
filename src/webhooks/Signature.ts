/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com/) over
 * `${webhook-id}.${webhook-timestamp}.${body}`, by the subscription's scheme:
 * - `v1`: HMAC-SHA256 with the subscription's secret, sent as `webhook-signature: v1,<base64>`. A
 *   subscription being rotated has two secrets, so the header carries one signature per secret, separated
 *   by a space, and a receiver that knows either one verifies.
 * - `v1a`: Ed25519 with the service's webhook signing key (webhooks/WebhookKey.ts), sent as
 *   `webhook-signature: v1a,<base64>`; receivers verify with its public key, `whpk_<base64 of 32 bytes>`.
 * The receiver's side is `verifyWebhook` in src/client/webhook.ts (kept free of this module: the client
 * is what relying parties import).
 */
import { createHmac, randomBytes, sign as signEd25519, type KeyObject } from "node:crypto"
import { rawPublicKeyOf } from "../platform/SigningKeys.js"

export { SignatureScheme } from "../domain/SignatureScheme.js"

const SecretPrefix = "whsec_"
const Base64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** A new signing secret: "whsec_" and the standard base64 of 32 random bytes. */
export const generateSecret = (): string => SecretPrefix + randomBytes(32).toString("base64")

/** The HMAC key of a "whsec_…" secret. Throws on anything else (the service only stores secrets it generated). */
export const secretKey = (secret: string): Buffer => {
  if (!secret.startsWith(SecretPrefix)) throw new Error("A webhook secret starts with \"whsec_\".")
  const encoded = secret.slice(SecretPrefix.length)
  if (encoded.length === 0 || !Base64Pattern.test(encoded)) throw new Error("A webhook secret is \"whsec_\" and standard base64.")
  return Buffer.from(encoded, "base64")
}

/** One signature: "v1," and the base64 HMAC-SHA256 of `${id}.${timestamp}.${body}`. */
export const sign = (secret: string, id: string, timestampSeconds: number, body: string): string =>
  "v1," + createHmac("sha256", secretKey(secret)).update(`${id}.${timestampSeconds}.${body}`).digest("base64")

/** The service's `v1a` key: the Ed25519 private key, and its public key as receivers are given it. */
export interface WebhookSigningKey {
  readonly privateKey: KeyObject
  /** `whpk_` + standard base64 of the 32-byte raw public key. */
  readonly publicKey: string
  readonly kid: string
}

const PublicKeyPrefix = "whpk_"

/** `whpk_` and the standard base64 of the raw public key: what GET /api/v1/webhooks/signing-key serves. */
export const publicKeyText = (key: KeyObject): string => PublicKeyPrefix + rawPublicKeyOf(key).toString("base64")

/** One `v1a` signature: "v1a," and the base64 Ed25519 signature of `${id}.${timestamp}.${body}`. */
export const signV1a = (privateKey: KeyObject, id: string, timestampSeconds: number, body: string): string =>
  "v1a," + signEd25519(null, Buffer.from(`${id}.${timestampSeconds}.${body}`, "utf8"), privateKey).toString("base64")

/** What signs a delivery: the subscription's secrets (`v1`) or the service's webhook key (`v1a`). */
export type DeliverySigner = ReadonlyArray<string> | WebhookSigningKey

/** The `webhook-signature` value: one `v1` signature per secret, separated by one space, or the one `v1a` signature. */
export const signatureHeader = (signer: DeliverySigner, id: string, timestampSeconds: number, body: string): string =>
  "privateKey" in signer
    ? signV1a(signer.privateKey, id, timestampSeconds, body)
    : signer.map((secret) => sign(secret, id, timestampSeconds, body)).join(" ")

/** Every header of a delivery that the signature scheme defines, and the body's type. */
export const webhookHeaders = (
  signer: DeliverySigner,
  id: string,
  timestampSeconds: number,
  body: string
): Record<string, string> => ({
  "content-type": "application/json",
  "webhook-id": id,
  "webhook-timestamp": String(timestampSeconds),
  "webhook-signature": signatureHeader(signer, id, timestampSeconds, body)
})
