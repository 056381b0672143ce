/**
 * What a webhook receiver runs on each delivery: the Standard Webhooks check
 * (https://www.standardwebhooks.com/) of the `webhook-id`, `webhook-timestamp` and `webhook-signature`
 * headers against the subscription's secret, then the body as JSON. Self-contained (node:crypto only),
 * and like the package's other verifiers it never throws: a failure is a verdict naming the check.
 *
 * Pass the body exactly as received (the raw text or bytes, before any JSON parsing): the signature
 * covers those bytes, and a body parsed and serialised again will not verify.
 */
import { createHmac, timingSafeEqual } from "node:crypto"

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

/** A secret's HMAC key: "whsec_" and base64 (the prefix may be left off, as other Standard Webhooks libraries allow). */
const keyOf = (secret: string): Buffer | undefined => {
  const encoded = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret
  return encoded.length > 0 && Base64Pattern.test(encoded) ? Buffer.from(encoded, "base64") : undefined
}

const failure = (reason: WebhookFailureReason, detail: string): WebhookVerdict => ({ ok: false, reason, detail })

/**
 * Checks a delivery: the three headers are present, the timestamp is within the tolerance of now, and
 * at least one of the space-separated `v1,<base64>` signatures is the HMAC-SHA256 of
 * `${id}.${timestamp}.${body}` under (one of) the secret(s). Give both secrets while rotating.
 */
export const verifyWebhook = (
  secret: string | ReadonlyArray<string>,
  headers: WebhookHeaders,
  body: string | Uint8Array,
  options: WebhookVerifyOptions = {}
): WebhookVerdict => {
  const secrets = typeof secret === "string" ? [secret] : secret
  const keys: Array<Buffer> = []
  for (const one of secrets) {
    const key = typeof one === "string" ? keyOf(one) : undefined
    if (key === undefined) return failure("malformed-secret", "The secret is not \"whsec_\" followed by base64.")
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
  const expected = keys.map((key) => createHmac("sha256", key).update(prefix).update(bytes).digest())
  const matched = signatures!.split(" ").some((token) => {
    if (!token.startsWith("v1,")) return false
    const encoded = token.slice(3)
    if (!Base64Pattern.test(encoded)) return false
    const given = Buffer.from(encoded, "base64")
    return expected.some((digest) => given.length === digest.length && timingSafeEqual(given, digest))
  })
  if (!matched) {
    return failure("no-matching-signature", "No v1 signature in the webhook-signature header matches the body under the secret.")
  }

  let payload: unknown
  try {
    payload = JSON.parse(typeof body === "string" ? body : Buffer.from(body).toString("utf8"))
  } catch {
    return failure("malformed-body", "The signature matches but the body is not JSON.")
  }
  return { ok: true, payload, id: id!, timestamp }
}
