import * as fc from "fast-check"
import { Webhook } from "standardwebhooks"
import { describe, expect, it } from "vitest"
import { verifyWebhook } from "../../src/client/webhook.js"
import { generateSecret, webhookHeaders } from "../../src/webhooks/Signature.js"

/**
 * Our v1 (HMAC-SHA256) webhook signatures against an implementation that is not ours: the Standard Webhooks
 * reference package (`standardwebhooks`, the specification's own TypeScript library). It has no v1a; the v1a
 * scheme is checked with node:crypto from the specification's wording in signatureV1a.test.ts.
 */
const idArb = fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/)

describe("v1 signatures, checked by the standardwebhooks package", () => {
  it("verify with the secret, both secrets during a rotation's overlap, and refuse a changed body", () => {
    fc.assert(fc.property(idArb, fc.json(), (id, body) => {
      const [current, previous] = [generateSecret(), generateSecret()]
      const timestamp = Math.floor(Date.now() / 1000)
      for (const secrets of [[current], [current, previous]]) {
        const headers = webhookHeaders(secrets, id, timestamp, body)
        for (const secret of secrets) expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body))
        expect(() => new Webhook(current).verify(body + " ", headers)).toThrow()
        expect(() => new Webhook(generateSecret()).verify(body, headers)).toThrow()
      }
    }), { numRuns: 100 })
  })

  it("and what the package signs, our client verifies", () => {
    fc.assert(fc.property(idArb, fc.json(), (id, body) => {
      const secret = generateSecret()
      const at = new Date()
      const timestamp = Math.floor(at.getTime() / 1000)
      const signature = new Webhook(secret).sign(id, at, body)
      const headers = { "webhook-id": id, "webhook-timestamp": String(timestamp), "webhook-signature": signature }
      expect(verifyWebhook(secret, headers, body, { now: timestamp })).toEqual({ ok: true, payload: JSON.parse(body), id, timestamp })
    }), { numRuns: 100 })
  })
})
