import { createHmac } from "node:crypto"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { verifyWebhook } from "../../src/client/webhook.js"
import { generateSecret, secretKey, sign, signatureHeader, webhookHeaders } from "../../src/webhooks/Signature.js"

// The Standard Webhooks test vector (the reference libraries' tests).
const vector = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: "{\"test\": 2432232314}",
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
}

const secretArb = fc.uint8Array({ minLength: 1, maxLength: 64 }).map((bytes) => "whsec_" + Buffer.from(bytes).toString("base64"))
const idArb = fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/)
const timestampArb = fc.integer({ min: 1_500_000_000, max: 4_000_000_000 })
const bodyArb = fc.json()

describe("signing", () => {
  it("matches the Standard Webhooks vector and an HMAC computed here", () => {
    expect(sign(vector.secret, vector.id, vector.timestamp, vector.body)).toBe(vector.signature)
    const key = Buffer.from(vector.secret.slice("whsec_".length), "base64")
    const independent = createHmac("sha256", key).update(`${vector.id}.${vector.timestamp}.${vector.body}`).digest("base64")
    expect(vector.signature).toBe(`v1,${independent}`)
    expect(verifyWebhook(vector.secret, {
      "webhook-id": vector.id, "webhook-timestamp": String(vector.timestamp), "webhook-signature": vector.signature
    }, vector.body, { now: vector.timestamp + 10 })).toEqual({ ok: true, payload: { test: 2432232314 }, id: vector.id, timestamp: vector.timestamp })
  })

  it("generates whsec_ secrets of 32 random bytes", () => {
    const secrets = new Set(Array.from({ length: 50 }, generateSecret))
    expect(secrets.size).toBe(50)
    for (const secret of secrets) {
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
      expect(secretKey(secret)).toHaveLength(32)
    }
  })

  it("refuses a malformed secret", () => {
    for (const secret of ["", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_abc"]) {
      expect(() => secretKey(secret), secret).toThrow(/whsec_/)
    }
  })

  it("puts one signature per secret in the header, and the headers are the scheme's", () => {
    const [a, b] = [generateSecret(), generateSecret()]
    const header = signatureHeader([a, b], "msg_1", 1_700_000_000, "{}")
    expect(header.split(" ")).toEqual([sign(a, "msg_1", 1_700_000_000, "{}"), sign(b, "msg_1", 1_700_000_000, "{}")])
    expect(webhookHeaders([a], "msg_1", 1_700_000_000, "{}")).toEqual({
      "content-type": "application/json",
      "webhook-id": "msg_1",
      "webhook-timestamp": "1700000000",
      "webhook-signature": sign(a, "msg_1", 1_700_000_000, "{}")
    })
  })
})

describe("verifyWebhook", () => {
  it("accepts what was signed, with the payload parsed, given headers as an object, a Headers or bytes", () => {
    fc.assert(fc.property(secretArb, idArb, timestampArb, bodyArb, (secret, id, timestamp, body) => {
      const headers = webhookHeaders([secret], id, timestamp, body)
      const expected = { ok: true, payload: JSON.parse(body), id, timestamp }
      expect(verifyWebhook(secret, headers, body, { now: timestamp })).toEqual(expected)
      expect(verifyWebhook(secret, new Headers(headers), Buffer.from(body), { now: new Date(timestamp * 1000) })).toEqual(expected)
      const shouted = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]))
      expect(verifyWebhook(secret, shouted, body, { now: timestamp + 299 }).ok).toBe(true)
    }), { numRuns: 200 })
  })

  it("rejects any flipped byte of the body, the id or the timestamp", () => {
    fc.assert(fc.property(secretArb, idArb, timestampArb, bodyArb, fc.nat(), fc.integer({ min: 1, max: 255 }), fc.constantFrom("body", "id", "timestamp"),
      (secret, id, timestamp, body, at, flip, field) => {
        const headers = webhookHeaders([secret], id, timestamp, body)
        const tamper = (text: string): string => {
          const bytes = Buffer.from(text)
          const index = at % bytes.length
          bytes[index] = bytes[index]! ^ flip
          return bytes.toString("latin1")
        }
        const verdict = field === "body"
          ? verifyWebhook(secret, headers, tamper(body), { now: timestamp })
          : verifyWebhook(secret, { ...headers, [`webhook-${field}`]: tamper(headers[`webhook-${field}`]!) }, body, { now: timestamp, toleranceSeconds: 1e12 })
        expect(verdict.ok).toBe(false)
        if (!verdict.ok) expect(["no-matching-signature", "malformed-timestamp", "missing-header"]).toContain(verdict.reason)
      }), { numRuns: 500 })
  })

  it("during rotation the two-signature header verifies with either secret, and not with a third", () => {
    fc.assert(fc.property(secretArb, secretArb, secretArb, idArb, timestampArb, bodyArb, (a, b, c, id, timestamp, body) => {
      fc.pre(new Set([a, b, c].map((s) => secretKey(s).toString("hex"))).size === 3)
      const headers = webhookHeaders([a, b], id, timestamp, body)
      expect(verifyWebhook(a, headers, body, { now: timestamp }).ok).toBe(true)
      expect(verifyWebhook(b, headers, body, { now: timestamp }).ok).toBe(true)
      expect(verifyWebhook([c, b], headers, body, { now: timestamp }).ok).toBe(true)
      const other = verifyWebhook(c, headers, body, { now: timestamp })
      expect(other).toMatchObject({ ok: false, reason: "no-matching-signature" })
    }), { numRuns: 100 })
  })

  it("accepts a timestamp within the tolerance either way and names the failure outside it", () => {
    const secret = generateSecret()
    const headers = webhookHeaders([secret], "msg_t", 1_700_000_000, "{}")
    expect(verifyWebhook(secret, headers, "{}", { now: 1_700_000_300 }).ok).toBe(true)
    expect(verifyWebhook(secret, headers, "{}", { now: 1_699_999_700 }).ok).toBe(true)
    expect(verifyWebhook(secret, headers, "{}", { now: 1_700_000_301 })).toMatchObject({ ok: false, reason: "timestamp-too-old" })
    expect(verifyWebhook(secret, headers, "{}", { now: 1_699_999_699 })).toMatchObject({ ok: false, reason: "timestamp-too-new" })
    expect(verifyWebhook(secret, headers, "{}", { now: 1_700_000_301, toleranceSeconds: 600 }).ok).toBe(true)
    expect(verifyWebhook(secret, headers, "{}").ok).toBe(false)
  })

  it("names a missing header, a malformed timestamp, a malformed secret, a non-v1 signature and a body that is not JSON", () => {
    const secret = generateSecret()
    const headers = webhookHeaders([secret], "msg_x", 1_700_000_000, "not json")
    const now = { now: 1_700_000_000 }
    for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
      const { [name]: _, ...rest } = headers
      expect(verifyWebhook(secret, rest, "not json", now)).toMatchObject({ ok: false, reason: "missing-header", detail: `The ${name} header is missing.` })
    }
    expect(verifyWebhook(secret, { ...headers, "webhook-timestamp": "1700000000.5" }, "not json", now)).toMatchObject({ reason: "malformed-timestamp" })
    expect(verifyWebhook("whsec_!!", headers, "not json", now)).toMatchObject({ reason: "malformed-secret" })
    expect(verifyWebhook(secret, { ...headers, "webhook-signature": headers["webhook-signature"]!.replace("v1,", "v2,") }, "not json", now))
      .toMatchObject({ reason: "no-matching-signature" })
    expect(verifyWebhook(secret, headers, "not json", now)).toMatchObject({ ok: false, reason: "malformed-body" })
    // The secret without its prefix is the same key.
    const unprefixed = secret.slice("whsec_".length)
    expect(verifyWebhook(unprefixed, webhookHeaders([secret], "msg_y", 1_700_000_000, "[]"), "[]", now)).toMatchObject({ ok: true, payload: [] })
  })
})
