import { createHash, verify } from "node:crypto"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { keysFromJwks } from "../../src/domain/EventVerify.js"
import {
  entryBytesOf,
  entryLeafHashOf,
  eventEntryOf,
  parseEntryBytes,
  parseLogEntry,
  receiptEntryOf,
  receiptSigningInputOf,
  signReceiptDigest,
  verifyReceiptSignature
} from "../../src/log/Entries.js"
import { otherReceiptSigner, receiptJwks, receiptSigner } from "./logs.js"

const digest = "0123456789abcdef".repeat(4)
const receiptEntry = receiptEntryOf({ receipt_id: "rr_01J00000000000000000000042", receipt_digest: digest, created_at: "2031-03-01T00:00:00.000Z" })
const eventEntry = eventEntryOf({ public_id: "DET-V1-LOG-0001", sequence: 7, eventHash: "e".repeat(64) })

describe("log entries", () => {
  it("are the UTF-8 of the JCS form: members sorted, no spaces", () => {
    expect(Buffer.from(entryBytesOf(receiptEntry)).toString("utf8")).toBe(
      `{"created_at":"2031-03-01T00:00:00.000Z","receipt_digest":"${digest}","receipt_id":"rr_01J00000000000000000000042","type":"pv.log.receipt.v1"}`
    )
    expect(Buffer.from(entryBytesOf(eventEntry)).toString("utf8")).toBe(
      `{"eventHash":"${"e".repeat(64)}","public_id":"DET-V1-LOG-0001","sequence":7,"type":"pv.log.event.v1"}`
    )
  })

  it("hash to SHA-256(0x00 ‖ bytes)", () => {
    const bytes = Buffer.from(entryBytesOf(eventEntry))
    expect(Buffer.from(entryLeafHashOf(eventEntry)).toString("hex")).toBe(createHash("sha256").update(Buffer.concat([Buffer.of(0), bytes])).digest("hex"))
  })

  it("parse back from the wire, and from bundle bytes only in their JCS form", () => {
    expect(parseLogEntry(JSON.parse(JSON.stringify(receiptEntry)))).toEqual({ ok: true, value: receiptEntry })
    expect(parseEntryBytes(entryBytesOf(eventEntry))).toEqual({ ok: true, value: eventEntry })
    expect(parseEntryBytes(Buffer.from(JSON.stringify(eventEntry, null, 1))).ok).toBe(false)
    expect(parseEntryBytes(Buffer.from(JSON.stringify(eventEntry))).ok).toBe(false)
    expect(parseEntryBytes(Buffer.of(0xff)).ok).toBe(false)
  })

  it("refuse anything but the two exact shapes", () => {
    const bad: Array<unknown> = [
      null, [], "x", 1,
      { ...receiptEntry, extra: 1 },
      { ...receiptEntry, type: "pv.log.receipt.v2" },
      { ...receiptEntry, receipt_digest: digest.toUpperCase() },
      { ...receiptEntry, receipt_id: "" },
      { ...receiptEntry, created_at: 5 },
      { type: receiptEntry.type, receipt_id: receiptEntry.receipt_id, receipt_digest: digest },
      { ...eventEntry, sequence: 0 },
      { ...eventEntry, sequence: 1.5 },
      { ...eventEntry, sequence: "7" },
      { ...eventEntry, eventHash: "e".repeat(63) },
      { ...eventEntry, public_id: "" },
      { ...eventEntry, receipt_id: "rr" }
    ]
    for (const value of bad) expect([value, parseLogEntry(value).ok]).toEqual([value, false])
  })
})

describe("receipt signatures", () => {
  it("sign the UTF-8 of 'pv-receipt-v1\\n' + receipt_digest, base64url without padding, verifiable with the JWKS key", () => {
    expect(Buffer.from(receiptSigningInputOf(digest)).toString("utf8")).toBe(`pv-receipt-v1\n${digest}`)
    const signature = signReceiptDigest(digest, receiptSigner)
    expect(signature.alg).toBe("Ed25519")
    expect(signature.kid).toBe(receiptSigner.kid)
    expect(signature.sig).toMatch(/^[A-Za-z0-9_-]{86}$/)
    // Checked with node:crypto directly against the published JWK, not through the module's verifier.
    const key = keysFromJwks(receiptJwks).get(receiptSigner.kid)!
    expect(verify(null, Buffer.from(`pv-receipt-v1\n${digest}`, "utf8"), key, Buffer.from(signature.sig, "base64url"))).toBe(true)
    expect(verifyReceiptSignature(digest, signature, keysFromJwks(receiptJwks))).toEqual({ ok: true, value: receiptSigner.kid })
  })

  it("fail for another digest, another key, an unknown kid, or a malformed member", () => {
    const keys = keysFromJwks(receiptJwks)
    const signature = signReceiptDigest(digest, receiptSigner)
    expect(verifyReceiptSignature("f".repeat(64), signature, keys).ok).toBe(false)
    expect(verifyReceiptSignature(digest, { ...signReceiptDigest(digest, otherReceiptSigner), kid: receiptSigner.kid }, keys).ok).toBe(false)
    expect(verifyReceiptSignature(digest, signReceiptDigest(digest, otherReceiptSigner), keys)).toEqual({
      ok: false,
      detail: `no receipt key has kid ${otherReceiptSigner.kid}`
    })
    for (const bad of [null, {}, { ...signature, alg: "EdDSA" }, { ...signature, sig: signature.sig + "=" }, { ...signature, sig: 5 }, { ...signature, kid: undefined }]) {
      expect(verifyReceiptSignature(digest, bad, keys).ok).toBe(false)
    }
    expect(verifyReceiptSignature(digest.toUpperCase(), signature, keys).ok).toBe(false)
    expect(() => receiptSigningInputOf("abc")).toThrow(TypeError)
  })

  it("any flipped bit of the signature fails (property)", () => {
    const keys = keysFromJwks(receiptJwks)
    const signature = signReceiptDigest(digest, receiptSigner)
    fc.assert(
      fc.property(fc.nat({ max: 64 * 8 - 1 }), (bit) => {
        const bytes = Buffer.from(signature.sig, "base64url")
        bytes[bit >> 3] = bytes[bit >> 3]! ^ (1 << (bit & 7))
        expect(verifyReceiptSignature(digest, { ...signature, sig: bytes.toString("base64url") }, keys).ok).toBe(false)
      }),
      { numRuns: 100 }
    )
  })
})
