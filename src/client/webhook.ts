/**
 * What a webhook receiver runs on each delivery: the Standard Webhooks check
 * (https://www.standardwebhooks.com/) of the `webhook-id`, `webhook-timestamp` and `webhook-signature`
 * headers against the subscription's secret (`v1`, HMAC-SHA256) or the service's public key (`v1a`,
 * Ed25519, `whpk_…` from GET /api/v1/webhooks/signing-key), then the body as JSON. Self-contained (node:crypto only),
 * and like the package's other verifiers it never throws: a failure is a verdict naming the check.
 *
 * Pass the body exactly as received (the raw text or bytes, before any JSON parsing): the signature
 * covers those bytes, and a body parsed and serialised again will not verify.
 */
import { createHmac, createPublicKey, type KeyObject, timingSafeEqual, verify } from "node:crypto"

export type WebhookFailureReason =
  | "malformed-secret"
  | "missing-header"
  | "malformed-timestamp"
  | "timestamp-too-old"
  | "timestamp-too-new"
  | "no-matching-signature"
  | "malformed-body"

export type WebhookVerdict =
  | {
    readonly ok: true
    /** The body, parsed as JSON. */
    readonly payload: unknown
    /** `webhook-id`: the same for every retry of one message, so a receiver can drop duplicates by it. */
    readonly id: string
    /** `webhook-timestamp`, Unix seconds. */
    readonly timestamp: number
  }
  | { readonly ok: false; readonly reason: WebhookFailureReason; readonly detail: string }

export interface WebhookVerifyOptions {
  /** How far `webhook-timestamp` may be from now, either way, in seconds. Default 300 (5 minutes). */
  readonly toleranceSeconds?: number
  /** The current time (a `Date`, or Unix seconds); default the clock. */
  readonly now?: Date | number
}

/** Node's `req.headers`, a plain object of any case, or a fetch `Headers` (anything with `get`). */
export type WebhookHeaders =
  | { readonly get: (name: string) => string | null | undefined }
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

export const WebhookDefaultToleranceSeconds = 300

const headerOf = (headers: WebhookHeaders, name: string): string | undefined => {
  if (typeof (headers as { get?: unknown }).get === "function") {
    return (headers as { get: (name: string) => string | null | undefined }).get(name) ?? undefined
  }
  const record = headers as Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  const key = Object.keys(record).find((candidate) => candidate.toLowerCase() === name)
  const value = key === undefined ? undefined : record[key]
  return typeof value === "string" ? value : value?.[0]
}

const Base64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** SPKI DER of an Ed25519 public key is this fixed prefix followed by the 32 raw bytes. */
const spkiEd25519Prefix = Buffer.from("302a300506032b6570032100", "hex")

type VerifyingKey = { readonly scheme: "v1"; readonly hmac: Buffer } | { readonly scheme: "v1a"; readonly publicKey: KeyObject }

/**
 * A `v1` secret's HMAC key ("whsec_" and base64; the prefix may be left off, as other Standard Webhooks
 * libraries allow), or a `v1a` public key ("whpk_" and the base64 of 32 bytes; the prefix is required).
 */
const keyOf = (secret: string): VerifyingKey | undefined => {
  if (secret.startsWith("whpk_")) {
    const encoded = secret.slice("whpk_".length)
    const raw = Base64Pattern.test(encoded) ? Buffer.from(encoded, "base64") : undefined
    return raw?.length === 32
      ? { scheme: "v1a", publicKey: createPublicKey({ key: Buffer.concat([spkiEd25519Prefix, raw]), format: "der", type: "spki" }) }
      : undefined
  }
  const encoded = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret
  return encoded.length > 0 && Base64Pattern.test(encoded) ? { scheme: "v1", hmac: Buffer.from(encoded, "base64") } : undefined
}

const failure = (reason: WebhookFailureReason, detail: string): WebhookVerdict => ({ ok: false, reason, detail })

/**
 * Checks a delivery: the three headers are present, the timestamp is within the tolerance of now, and
 * at least one of the space-separated signatures verifies over `${id}.${timestamp}.${body}`: a
 * `v1,<base64>` HMAC-SHA256 under (one of) the `whsec_` secret(s), or a `v1a,<base64>` Ed25519 signature
 * under (one of) the `whpk_` public key(s). Give both secrets (or keys) while rotating.
 */
export const verifyWebhook = (
  secret: string | ReadonlyArray<string>,
  headers: WebhookHeaders,
  body: string | Uint8Array,
  options: WebhookVerifyOptions = {}
): WebhookVerdict => {
  const secrets = typeof secret === "string" ? [secret] : secret
  const keys: Array<VerifyingKey> = []
  for (const one of secrets) {
    const key = typeof one === "string" ? keyOf(one) : undefined
    if (key === undefined) {
      return failure("malformed-secret", "The secret is not \"whsec_\" followed by base64, nor a \"whpk_\" key of 32 bytes in base64.")
    }
    keys.push(key)
  }
  if (keys.length === 0) return failure("malformed-secret", "No secret was given.")

  const id = headerOf(headers, "webhook-id")
  const timestampText = headerOf(headers, "webhook-timestamp")
  const signatures = headerOf(headers, "webhook-signature")
  for (const [name, value] of [["webhook-id", id], ["webhook-timestamp", timestampText], ["webhook-signature", signatures]] as const) {
    if (value === undefined || value.trim() === "") return failure("missing-header", `The ${name} header is missing.`)
  }

  if (!/^\d{1,15}$/.test(timestampText!)) {
    return failure("malformed-timestamp", `The webhook-timestamp header is not Unix seconds: ${JSON.stringify(timestampText)}.`)
  }
  const timestamp = Number(timestampText)
  const now = options.now === undefined
    ? Date.now() / 1000
    : options.now instanceof Date ? options.now.getTime() / 1000 : options.now
  const tolerance = options.toleranceSeconds ?? WebhookDefaultToleranceSeconds
  if (timestamp < now - tolerance) {
    return failure("timestamp-too-old", `The webhook-timestamp is ${Math.round(now - timestamp)} s old; at most ${tolerance} s is accepted.`)
  }
  if (timestamp > now + tolerance) {
    return failure("timestamp-too-new", `The webhook-timestamp is ${Math.round(timestamp - now)} s ahead; at most ${tolerance} s is accepted.`)
  }

  // The timestamp is signed as it was sent (the header's text), which is what the sender put in it.
  const prefix = Buffer.from(`${id}.${timestampText}.`, "utf8")
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : body
  const signed = Buffer.concat([prefix, bytes])
  const expected = keys.flatMap((key) => key.scheme === "v1" ? [createHmac("sha256", key.hmac).update(signed).digest()] : [])
  const publicKeys = keys.flatMap((key) => key.scheme === "v1a" ? [key.publicKey] : [])
  const matched = signatures!.split(" ").some((token) => {
    const comma = token.indexOf(",")
    const scheme = token.slice(0, comma)
    const encoded = token.slice(comma + 1)
    if (comma < 0 || !Base64Pattern.test(encoded)) return false
    const given = Buffer.from(encoded, "base64")
    if (scheme === "v1") return expected.some((digest) => given.length === digest.length && timingSafeEqual(given, digest))
    return scheme === "v1a" && given.length === 64 && publicKeys.some((key) => verify(null, signed, key, given))
  })
  if (!matched) {
    return failure("no-matching-signature",
      "No signature in the webhook-signature header matches the body: no v1 under the secret(s), no v1a under the public key(s).")
  }

  let payload: unknown
  try {
    payload = JSON.parse(typeof body === "string" ? body : Buffer.from(body).toString("utf8"))
  } catch {
    return failure("malformed-body", "The signature matches but the body is not JSON.")
  }
  return { ok: true, payload, id: id!, timestamp }
}
