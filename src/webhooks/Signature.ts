/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com/): HMAC-SHA256 over
 * `${webhook-id}.${webhook-timestamp}.${body}` with the subscription's secret, sent as
 * `webhook-signature: v1,<base64>`. A subscription being rotated has two secrets, so the header carries
 * one signature per secret, separated by a space, and a receiver that knows either one verifies.
 * The receiver's side is `verifyWebhook` in src/client/webhook.ts (kept free of this module: the client
 * is what relying parties import).
 */
import { createHmac, randomBytes } from "node:crypto"

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

/** The `webhook-signature` value: one signature per secret, separated by one space. */
export const signatureHeader = (secrets: ReadonlyArray<string>, id: string, timestampSeconds: number, body: string): string =>
  secrets.map((secret) => sign(secret, id, timestampSeconds, body)).join(" ")

/** Every header of a delivery that the signature scheme defines, and the body's type. */
export const webhookHeaders = (
  secrets: ReadonlyArray<string>,
  id: string,
  timestampSeconds: number,
  body: string
): Record<string, string> => ({
  "content-type": "application/json",
  "webhook-id": id,
  "webhook-timestamp": String(timestampSeconds),
  "webhook-signature": signatureHeader(secrets, id, timestampSeconds, body)
})
