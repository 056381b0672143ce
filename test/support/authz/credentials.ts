import { base62Checksum, generateApiKey, isWellFormedApiKey, KeyPrefix } from "../../../src/domain/ApiKey.js"

/** `pv_live_` + 32 base62 + a checksum that does not match (docs/API.md §3.1: refused before any lookup). */
export const keyWithWrongChecksum = (): string => {
  const good = generateApiKey()
  const body = good.slice(0, -6)
  const right = base62Checksum(body)
  // Rotate every checksum character: the result is still 6 base62 characters but never the right CRC32.
  const wrong = [...right].map((c) => (c === "0" ? "1" : "0")).join("")
  const key = body + wrong
  if (!key.startsWith(KeyPrefix) || key.length !== good.length || isWellFormedApiKey(key)) throw new Error("bad fixture")
  return key
}

/** A key with a valid checksum that the service never issued. */
export const neverIssuedKey = (): string => {
  const key = generateApiKey()
  if (!isWellFormedApiKey(key)) throw new Error("bad fixture")
  return key
}

/** Bearer values that are not `pv_live_` keys at all. */
export const malformedBearer = "not-a-pv-key-0123456789"
