import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { base64Of, base64UrlOf, bytesEqual, decodeBase64Url, decodeStdBase64, hashFromHex, hexOf } from "../../src/verify/Bytes.js"

/**
 * The Buffer-free byte codecs the verifiers share with the page, against Node's Buffer: the same bytes,
 * and the decoders accept exactly the canonical texts (the one text Buffer would write for those bytes).
 */
const base64ish = fc.stringMatching(/^[A-Za-z0-9+/=_-]{0,12}$/)

describe("src/verify/Bytes.ts", () => {
  it("encodes as Buffer does, and decodes what it encodes (property)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }), (bytes) => {
        expect(base64Of(bytes)).toBe(Buffer.from(bytes).toString("base64"))
        expect(base64UrlOf(bytes)).toBe(Buffer.from(bytes).toString("base64url"))
        expect(hexOf(bytes)).toBe(Buffer.from(bytes).toString("hex"))
        expect(bytesEqual(decodeStdBase64(base64Of(bytes))!, bytes)).toBe(true)
        expect(bytesEqual(decodeBase64Url(base64UrlOf(bytes))!, bytes)).toBe(true)
      }),
      { numRuns: 500 }
    )
  })

  it("accepts a text only when it is the canonical encoding of its bytes (property)", () => {
    fc.assert(
      fc.property(base64ish, (text) => {
        const std = decodeStdBase64(text)
        const canonicalStd = /^[A-Za-z0-9+/=]*$/.test(text) && text.length % 4 === 0 && Buffer.from(text, "base64").toString("base64") === text
        expect(std !== undefined, text).toBe(canonicalStd)
        if (std !== undefined) expect(Buffer.from(std).toString("base64")).toBe(text)
        const url = decodeBase64Url(text)
        const canonicalUrl = /^[A-Za-z0-9_-]*$/.test(text) && Buffer.from(text, "base64url").toString("base64url") === text
        expect(url !== undefined, text).toBe(canonicalUrl)
        if (url !== undefined) expect(Buffer.from(url).toString("base64url")).toBe(text)
      }),
      { numRuns: 2000 }
    )
    expect(decodeStdBase64("AB==")).toBeUndefined()
    expect(decodeStdBase64("AA==")).toEqual(Uint8Array.of(0))
    expect(decodeBase64Url("AB")).toBeUndefined()
    expect(decodeBase64Url("A")).toBeUndefined()
  })

  it("reads 64 lowercase hex characters, nothing else (property)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (bytes) => {
        const hex = Buffer.from(bytes).toString("hex")
        expect(bytesEqual(hashFromHex(hex)!, bytes)).toBe(true)
        expect(hashFromHex(hex.toUpperCase())).toBe(/[a-f]/.test(hex) ? undefined : hashFromHex(hex))
        expect(hashFromHex(hex.slice(1))).toBeUndefined()
      })
    )
  })
})
