/**
 * The `wait` preference of an RFC 7240 `Prefer` header, as POST /reliance-receipts honours it: whole seconds
 * from 1 to 10. Per RFC 7240 a preference the server does not understand or cannot honour is ignored, never
 * an error: a malformed header, a `wait` that is not an integer, or one outside 1..10 gives undefined (no wait).
 * Only the first `wait` counts (RFC 7240 §2: a preference given twice is read once, the first).
 */
export const MaxPreferWaitSeconds = 10

/** `token [BWS "=" BWS (token / quoted-string)] *(OWS ";" [OWS parameter])`, comma-separated; returns the first `wait`'s value. */
const firstWaitValue = (header: string): string | undefined => {
  // Quoted strings may hold commas and semicolons: split outside them only.
  const preferences: Array<string> = []
  let current = ""
  let quoted = false
  for (let i = 0; i < header.length; i++) {
    const c = header[i]!
    if (quoted && c === "\\") {
      current += c + (header[i + 1] ?? "")
      i++
      continue
    }
    if (c === "\"") quoted = !quoted
    if (c === "," && !quoted) {
      preferences.push(current)
      current = ""
    } else current += c
  }
  preferences.push(current)
  for (const preference of preferences) {
    const head = preference.split(";")[0]!
    const eq = head.indexOf("=")
    const name = (eq < 0 ? head : head.slice(0, eq)).trim().toLowerCase()
    if (name !== "wait") continue
    if (eq < 0) return ""
    const raw = head.slice(eq + 1).trim()
    return raw.length >= 2 && raw.startsWith("\"") && raw.endsWith("\"") ? raw.slice(1, -1) : raw
  }
  return undefined
}

/** The seconds to wait for the receipt's proof, or undefined when the request does not (validly) ask for it. */
export const preferredWaitSeconds = (header: string | undefined): number | undefined => {
  // Several Prefer headers arrive joined into one comma-separated list, in order (Node does that).
  if (header === undefined) return undefined
  const value = firstWaitValue(header)
  if (value === undefined || !/^[0-9]{1,2}$/.test(value)) return undefined
  const seconds = Number(value)
  return seconds >= 1 && seconds <= MaxPreferWaitSeconds ? seconds : undefined
}
