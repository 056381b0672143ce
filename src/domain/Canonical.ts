import { createHash } from "node:crypto"
import canonicalize from "canonicalize"

/**
 * The one digest recipe of docs/API.md §2: RFC 8785 (JCS) canonical JSON, SHA-256, lowercase hex.
 * Digested values hold only strings, booleans, null, arrays, objects and safe integers, so JCS number
 * formatting never has to round.
 */
export const canonicalJson = (value: unknown): string => {
  const text = canonicalize(value)
  if (text === undefined) throw new TypeError("value has no canonical JSON form")
  return text
}

export const sha256Hex = (input: string | Uint8Array): string => createHash("sha256").update(input).digest("hex")

export const digestOf = (value: unknown): string => sha256Hex(canonicalJson(value))

export const DigestPattern = /^[0-9a-f]{64}$/u
