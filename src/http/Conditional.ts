/** `If-None-Match` per RFC 9110: a list of (weak or strong) tags, or `*`. */
export const etagMatches = (header: string | undefined, etag: string): boolean =>
  header !== undefined &&
  header.split(",").some((candidate) => {
    const tag = candidate.trim().replace(/^W\//, "")
    return tag === "*" || tag === etag
  })
