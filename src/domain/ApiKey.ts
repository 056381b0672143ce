import { randomBytes } from "node:crypto"
import { crc32 } from "node:zlib"
import { sha256Hex } from "./Canonical.js"
import { OneOf } from "./Json.js"

/** docs/API.md §3.1: `pv_live_` + 32 base62 (CSPRNG) + 6 base62 CRC32 of everything before it. */
export const KeyPrefix = "pv_live_"
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const SECRET_LENGTH = 32
const CHECKSUM_LENGTH = 6
export const ApiKeyLength = KeyPrefix.length + SECRET_LENGTH + CHECKSUM_LENGTH
const ShapePattern = /^pv_live_[0-9A-Za-z]{38}$/

export const Scopes = [
  "trust:read",
  "receipt:read",
  "receipt:write",
  "mcp:call",
  "actionability:read",
  "subscription:write"
] as const
export const Scope = OneOf("Scope", Scopes)
export type Scope = typeof Scope.Type

export const base62Checksum = (body: string): string => {
  // zlib's crc32 takes the string as UTF-8 itself, without a Buffer per call (keys are checked per request).
  let n = crc32(body)
  let out = ""
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[n % 62] + out
    n = Math.floor(n / 62)
  }
  return out
}

/** Uniform base62 from CSPRNG bytes: bytes ≥ 248 are dropped so every character is equally likely. */
const randomBase62 = (length: number): string => {
  let out = ""
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]
    }
  }
  return out
}

export const generateApiKey = (): string => {
  const body = KeyPrefix + randomBase62(SECRET_LENGTH)
  return body + base62Checksum(body)
}

/** Shape and checksum only: a key that fails here never reaches the key store. */
export const isWellFormedApiKey = (candidate: string): boolean =>
  ShapePattern.test(candidate) &&
  base62Checksum(candidate.slice(0, -CHECKSUM_LENGTH)) === candidate.slice(-CHECKSUM_LENGTH)

export const hashApiKey = (apiKey: string): string => sha256Hex(apiKey)

export const displayPrefix = (apiKey: string): string => apiKey.slice(0, 12)
