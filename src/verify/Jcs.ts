import canonicalize from "canonicalize"
import { hexOf, utf8 } from "./Bytes.js"
import { sha256, type Verifying } from "./Run.js"

/**
 * The one digest recipe of docs/API.md §2 ("canonical JSON", "digests"): RFC 8785 (JCS) canonical JSON, SHA-256, lowercase hex. The
 * `canonicalize` package has no Node dependency, so the page bundles the very same JCS.
 * Digested values hold only strings, booleans, null, arrays, objects and safe integers, so JCS number
 * formatting never has to round.
 */
export const canonicalJson = (value: unknown): string => {
  const text = canonicalize(value)
  if (text === undefined) throw new TypeError("value has no canonical JSON form")
  return text
}

export function* sha256Hex(input: string | Uint8Array): Verifying<string> {
  return hexOf(yield* sha256(typeof input === "string" ? utf8(input) : input))
}

/** SHA-256 hex of the JCS form; throws on a value without one (NaN, a lone surrogate, a cycle). */
export function* digestOf(value: unknown): Verifying<string> {
  return yield* sha256Hex(canonicalJson(value))
}
