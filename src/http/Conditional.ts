import { createHash } from "node:crypto"

/**
 * Conditional GET (RFC 9110 §13.1.2): does `If-None-Match` (`header`, a list of weak or strong entity tags, or
 * `*`) match the current representation's entity tag? Its comparison is the weak one: `W/"x"` matches `"x"`.
 * A match answers 304. Only ever asked for a representation that exists (a 200), where `*` matches.
 */
export const etagMatches = (header: string | undefined, etag: string): boolean =>
  header !== undefined &&
  header.split(",").some((candidate) => {
    const tag = candidate.trim().replace(/^W\//, "")
    return tag === "*" || tag === etag
  })

/** A strong entity tag of exactly these bytes: the quoted base64url SHA-256 of them. */
export const strongEtagOf = (bytes: Uint8Array | string): string =>
  `"${createHash("sha256").update(bytes).digest("base64url")}"`
