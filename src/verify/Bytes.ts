/**
 * Bytes without Buffer (the page's bundle has none): UTF-8, hex, base64 and base64url, the decoders
 * strict (canonical text only), and the small JSON predicates every verifier here shares.
 */

const encoder = new TextEncoder()

export const utf8 = (text: string): Uint8Array => encoder.encode(text)

/** UTF-8 bytes to text, or undefined when they are not valid UTF-8 (a BOM is kept as a character). */
export const utf8Decode = (bytes: Uint8Array): string | undefined => {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    return undefined
  }
}

export const concat = (...parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

export const bytesEqual = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

const hexByte = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"))

export const hexOf = (bytes: Uint8Array): string => {
  let out = ""
  for (const b of bytes) out += hexByte[b]
  return out
}

/** 64 lowercase hex characters: every hash and digest on the wire. */
export const HexHashPattern = /^[0-9a-f]{64}$/u

/** The value of a lowercase hex digit's character code (the pattern has already admitted only those). */
const hexValue = (code: number): number => (code <= 0x39 ? code - 0x30 : code - 0x57)

/** A hash from its wire form: exactly 64 lowercase hex characters, nothing else. */
export const hashFromHex = (hex: unknown): Uint8Array | undefined => {
  if (typeof hex !== "string" || !HexHashPattern.test(hex)) return undefined
  const out = new Uint8Array(32)
  for (let i = 0; i < 32; i++) out[i] = (hexValue(hex.charCodeAt(2 * i)) << 4) | hexValue(hex.charCodeAt(2 * i + 1))
  return out
}

export const hashesFromHex = (value: unknown): Array<Uint8Array> | undefined => {
  if (!Array.isArray(value)) return undefined
  const hashes: Array<Uint8Array> = []
  for (const item of value) {
    const hash = hashFromHex(item)
    if (hash === undefined) return undefined
    hashes.push(hash)
  }
  return hashes
}

export const base64Of = (bytes: Uint8Array): string => {
  let binary = ""
  for (const b of bytes) binary += String.fromCharCode(b)
  return btoa(binary)
}

export const base64UrlOf = (bytes: Uint8Array): string => base64Of(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")

const tableOf = (alphabet: string): Int8Array => {
  const table = new Int8Array(128).fill(-1)
  for (const [value, char] of Array.from(alphabet).entries()) table[char.charCodeAt(0)] = value
  return table
}

const Digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
const StdTable = tableOf(Digits + "+/")
const UrlTable = tableOf(Digits + "-_")

/**
 * Unpadded base64 digits → bytes, canonical only: a length that leaves 6 stray bits, a character
 * outside the alphabet, or a non-zero unused bit in the last character is refused, so each byte
 * string has exactly one accepted text.
 */
const decodeDigits = (text: string, table: Int8Array): Uint8Array | undefined => {
  if (text.length % 4 === 1) return undefined
  const out = new Uint8Array(Math.floor((text.length * 3) / 4))
  let acc = 0
  let bits = 0
  let at = 0
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    const value = code < 128 ? table[code]! : -1
    if (value < 0) return undefined
    acc = (acc << 6) | value
    bits += 6
    if (bits >= 8) {
      bits -= 8
      out[at++] = (acc >> bits) & 0xff
    }
    acc &= (1 << bits) - 1
  }
  return acc === 0 ? out : undefined
}

const StdBase64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Standard base64 with padding, canonical only (the unused bits of the last character are zero). */
export const decodeStdBase64 = (text: string): Uint8Array | undefined =>
  StdBase64Pattern.test(text) ? decodeDigits(text.replace(/=+$/, ""), StdTable) : undefined

/** Unpadded base64url, canonical only. */
export const decodeBase64Url = (text: string): Uint8Array | undefined => decodeDigits(text, UrlTable)

const SignaturePattern = /^[A-Za-z0-9_-]{86}$/

/**
 * Whether `sig` is the one canonical unpadded base64url text of 64 bytes (an Ed25519 signature): 86
 * characters of the alphabet, the last one's 4 unused bits zero. A provider may then decode it its own way.
 */
export const isSignatureText = (sig: string): boolean => SignaturePattern.test(sig) && (UrlTable[sig.charCodeAt(85)]! & 0x0f) === 0

/** An unpadded base64url Ed25519 signature (64 bytes), or undefined. */
export const signatureBytes = (sig: string): Uint8Array | undefined => (SignaturePattern.test(sig) ? decodeBase64Url(sig) : undefined)

export const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A value for a detail message; never throws. */
export const shown = (u: unknown): string => {
  try {
    return JSON.stringify(u) ?? String(u)
  } catch {
    return String(u)
  }
}

/** UTF-16 with no lone surrogate, so the text has a UTF-8 form. */
export const isWellFormed = (text: string): boolean =>
  !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text)
