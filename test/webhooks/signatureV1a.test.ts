import { createPublicKey, generateKeyPairSync, verify } from "node:crypto"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { verifyWebhook } from "../../src/client/webhook.js"
import { privateKeyFromSeed } from "../../src/platform/SigningKeys.js"
import { publicKeyText, signV1a, webhookHeaders, type WebhookSigningKey } from "../../src/webhooks/Signature.js"

const keyArb = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((seed): WebhookSigningKey => {
  const privateKey = privateKeyFromSeed(seed)
  return { privateKey, publicKey: publicKeyText(privateKey), kid: "k" }
})
const idArb = fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/)
const timestampArb = fc.integer({ min: 1_500_000_000, max: 4_000_000_000 })

describe("v1a (Ed25519) webhook signatures", () => {
  it("verify independently with node:crypto over `${id}.${timestamp}.${body}`, and with the client under the whpk_ key", () => {
    fc.assert(fc.property(keyArb, idArb, timestampArb, fc.json(), (key, id, timestamp, body) => {
      const headers = webhookHeaders(key, id, timestamp, body)
      const [scheme, encoded] = headers["webhook-signature"]!.split(",")
      expect(scheme).toBe("v1a")
      const raw = Buffer.from(key.publicKey.slice("whpk_".length), "base64")
      expect(raw).toHaveLength(32)
      const publicKey = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") }, format: "jwk" })
      expect(verify(null, Buffer.from(`${id}.${timestamp}.${body}`), publicKey, Buffer.from(encoded!, "base64"))).toBe(true)
      expect(verifyWebhook(key.publicKey, headers, body, { now: timestamp })).toEqual({ ok: true, payload: JSON.parse(body), id, timestamp })
    }), { numRuns: 100 })
  })

  it("refuses a flipped body byte, another key, and a v1a signature relabelled v1", () => {
    fc.assert(fc.property(keyArb, keyArb, idArb, timestampArb, fc.json(), (key, other, id, timestamp, body) => {
      fc.pre(key.publicKey !== other.publicKey)
      const headers = webhookHeaders(key, id, timestamp, body)
      expect(verifyWebhook(other.publicKey, headers, body, { now: timestamp })).toMatchObject({ ok: false, reason: "no-matching-signature" })
      expect(verifyWebhook(key.publicKey, headers, body + " ", { now: timestamp }).ok).toBe(false)
      const relabelled = { ...headers, "webhook-signature": headers["webhook-signature"]!.replace("v1a,", "v1,") }
      expect(verifyWebhook(key.publicKey, relabelled, body, { now: timestamp }).ok).toBe(false)
    }), { numRuns: 50 })
  })

  it("refuses a malformed whpk_ key", () => {
    const { privateKey } = generateKeyPairSync("ed25519")
    const headers = { "webhook-id": "m", "webhook-timestamp": "1700000000", "webhook-signature": signV1a(privateKey, "m", 1_700_000_000, "{}") }
    for (const bad of ["whpk_", "whpk_abc", "whpk_" + Buffer.alloc(31).toString("base64")]) {
      expect(verifyWebhook(bad, headers, "{}", { now: 1_700_000_000 })).toMatchObject({ ok: false, reason: "malformed-secret" })
    }
    expect(verifyWebhook(publicKeyText(privateKey), headers, "{}", { now: 1_700_000_000 }).ok).toBe(true)
  })
})
