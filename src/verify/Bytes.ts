/**
 * Bytes without Buffer (the page's bundle has none): UTF-8, hex, base64 and base64url, the decoders
 * strict (canonical text only), and the small JSON predicates every verifier here shares.
 */

const encoder = new TextEncoder()

export const utf8 = (text: string): Uint8Array => encoder.encode(text)

export const concat = (...parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

export const bytesEqual = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((byte, i) => byte === b[i])

export const hexOf = (bytes: Uint8Array): string => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")

/** 64 lowercase hex characters: every hash and digest on the wire. */
export const HexHashPattern = /^[0-9a-f]{64}$/u

/** A hash from its wire form: exactly 64 lowercase hex characters, nothing else. */
export const hashFromHex = (hex: unknown): Uint8Array | undefined => {
  if (typeof hex !== "string" || !HexHashPattern.test(hex)) return undefined
  const out = new Uint8Array(32)
  for (let i = 0; i < 32; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16)
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

const bytesOfBinary = (text: string): Uint8Array => Uint8Array.from(text, (c) => c.charCodeAt(0))

const StdBase64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Standard base64 with padding, canonical only (the unused bits of the last character are zero). */
export const decodeStdBase64 = (text: string): Uint8Array | undefined => {
  if (!StdBase64Pattern.test(text)) return undefined
  const bytes = bytesOfBinary(atob(text))
  return base64Of(bytes) === text ? bytes : undefined
}

/** Unpadded base64url, canonical only. */
export const decodeBase64Url = (text: string): Uint8Array | undefined => {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return undefined
  const std = text.replace(/-/g, "+").replace(/_/g, "/")
  const bytes = bytesOfBinary(atob(std + "=".repeat((4 - (std.length % 4)) % 4)))
  return base64UrlOf(bytes) === text ? bytes : undefined
}

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
