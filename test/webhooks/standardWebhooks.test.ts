import * as fc from "fast-check"
import { Webhook } from "standardwebhooks"
import { describe, expect, it } from "vitest"
import { verifyWebhook } from "../../src/client/webhook.js"
import { privateKeyFromSeed } from "../../src/platform/SigningKeys.js"
import { generateSecret, publicKeyText, signV1a, webhookHeaders } from "../../src/webhooks/Signature.js"

/**
 * Our v1 (HMAC-SHA256) webhook signatures against an implementation that is not ours: the Standard Webhooks
 * reference package (`standardwebhooks`, the specification's own TypeScript library). That package has no v1a
 * (Ed25519) yet; the v1a signatures are held to the fixed signing vectors of the specification repository's
 * proposed v1a libraries (below), and checked with node:crypto for any key and body in signatureV1a.test.ts.
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

/**
 * The v1a vectors published with the v1a implementations proposed to the specification's own libraries
 * (github.com/standard-webhooks/standard-webhooks, not yet merged): pull request 253 (Go, crypto/ed25519:
 * libraries/go/webhook_asymmetric_test.go, TestAsymmetricWebhookSign, whose `whsk_` is the base64 of the 32-byte
 * seed) and pull request 308 (JavaScript, @stablelib/ed25519: libraries/javascript/src/webhook.test.ts,
 * "v1a: sign function works", seed 0x01 × 32). Ed25519 is deterministic, so the same seed and message give
 * exactly these signatures.
 */
const vectorMessage = { id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1614265330, body: '{"test": 2432232314}' }
const vectors = [
  {
    from: "Go library, pull request 253",
    seed: Buffer.from("VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=", "base64"),
    signature: "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag=="
  },
  {
    from: "JavaScript library, pull request 308",
    seed: Buffer.alloc(32, 1),
    signature: "v1a,Ykcu7AtGZGmZxFEH1Gaa2Nd7feY/CTuruoL4fqgnKwfbHU4DhemoVHZdvGfIvKvn4BIgwktLGGPGIr/i9nK7AA=="
  }
] as const

const vectorHeaders = (signature: string, id = vectorMessage.id, timestamp = String(vectorMessage.timestamp)) =>
  ({ "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": signature })

describe("v1a signatures, against the Standard Webhooks libraries' published v1a vectors", () => {
  for (const vector of vectors) {
    const privateKey = privateKeyFromSeed(vector.seed)
    const publicKey = publicKeyText(privateKey)
    const { id, timestamp, body } = vectorMessage
    const now = { now: timestamp }

    it(`our signer reproduces the ${vector.from} vector exactly, and our client accepts it`, () => {
      expect(signV1a(privateKey, id, timestamp, body)).toBe(vector.signature)
      expect(webhookHeaders({ privateKey, publicKey, kid: "k" }, id, timestamp, body)["webhook-signature"]).toBe(vector.signature)
      expect(verifyWebhook(publicKey, vectorHeaders(vector.signature), body, now)).toEqual({ ok: true, payload: JSON.parse(body), id, timestamp })
      // Among other signatures, as the libraries' mixed-header tests send it.
      const mixed = vectorHeaders(`v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= ${vector.signature}`)
      expect(verifyWebhook(publicKey, mixed, body, now).ok).toBe(true)
    })

    it(`our client refuses the ${vector.from} vector altered: any signature bit, the body, the id, the timestamp, the key`, () => {
      const refused = (headers: Record<string, string>, text = body, key = publicKey) =>
        expect(verifyWebhook(key, headers, text, now)).toMatchObject({ ok: false, reason: "no-matching-signature" })
      const raw = Buffer.from(vector.signature.slice("v1a,".length), "base64")
      for (let bit = 0; bit < raw.length * 8; bit++) {
        const flipped = Buffer.from(raw)
        flipped[bit >> 3]! ^= 1 << (bit & 7)
        refused(vectorHeaders("v1a," + flipped.toString("base64")))
      }
      refused(vectorHeaders(vector.signature), '{"test": 2432232315}')
      refused(vectorHeaders(vector.signature), body + " ")
      refused(vectorHeaders(vector.signature, id + "x"))
      refused(vectorHeaders(vector.signature, id, String(timestamp + 1)))
      const other = vectors.find((v) => v !== vector)!
      refused(vectorHeaders(vector.signature), body, publicKeyText(privateKeyFromSeed(other.seed)))
      refused(vectorHeaders(vector.signature.replace("v1a,", "v1,")))
    })
  }
})
