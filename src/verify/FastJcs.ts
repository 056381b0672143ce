import canonicalize from "canonicalize"

/**
 * RFC 8785 (JCS) without the detours the general `canonicalize` package takes for any JavaScript value:
 * for plain JSON data (what JSON.parse returns and what events and payloads hold) it writes the text in
 * one pass. Anything else — undefined or holes in arrays, NaN, Infinity, lone surrogates, toJSON,
 * non-plain objects, cycles, very deep nesting — goes to `canonicalize` itself, so the output, or the
 * error, is always exactly the package's (a property test holds the two together).
 */

/** Deeper than this, `canonicalize` decides (it reports cycles; real documents are nowhere near). */
const MaxDepth = 64

// String.prototype.isWellFormed (ES2024, Node ≥ 20): true when the string has no lone surrogate.
const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed()

const isPlainObject = (o: object): boolean => {
  const proto = Object.getPrototypeOf(o)
  return (proto === Object.prototype || proto === null) && typeof (o as { toJSON?: unknown }).toJSON !== "function"
}

/** The JCS text of `value`, or undefined when `value` is not plain JSON data. */
const write = (value: unknown, depth: number): string | undefined => {
  switch (typeof value) {
    case "string":
      return isWellFormed(value) ? JSON.stringify(value) : undefined
    case "number":
      // ECMAScript Number::toString is JCS's number form (-0 → "0", 1e21 → "1e+21").
      return Number.isFinite(value) ? String(value) : undefined
    case "boolean":
      return value ? "true" : "false"
    case "object": {
      if (value === null) return "null"
      if (depth > MaxDepth) return undefined
      if (Array.isArray(value)) {
        if (typeof (value as { toJSON?: unknown }).toJSON === "function") return undefined
        let out = "["
        for (let i = 0; i < value.length; i++) {
          const item = write(value[i], depth + 1)
          if (item === undefined) return undefined
          out += i === 0 ? item : `,${item}`
        }
        return `${out}]`
      }
      return isPlainObject(value) ? writeMembers(value as Record<string, unknown>, depth, null) : undefined
    }
    default:
      return undefined
  }
}

// Objects of one shape (every event, every payload of a type) list the same keys in the same order, so
// their plan — the keys in JCS order and each one's `"key":` — is remembered per key count: the last
// key list seen with that count and its plan.
interface Plan {
  readonly keys: ReadonlyArray<string>
  readonly sorted: ReadonlyArray<string>
  /** `"key":` per sorted key, undefined for a key with a lone surrogate (canonicalize refuses those). */
  readonly prefixes: ReadonlyArray<string | undefined>
}
const plans: Array<Plan | undefined> = []
const MaxPlannedCount = 32

const sameKeys = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean => {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

const planOf = (object: object): Plan => {
  const keys = Object.keys(object)
  const count = keys.length
  const cached = count <= MaxPlannedCount ? plans[count] : undefined
  if (cached !== undefined && sameKeys(cached.keys, keys)) return cached
  // Default sort: by UTF-16 code units, which is JCS's member order.
  const sorted = [...keys].sort()
  const plan = { keys, sorted, prefixes: sorted.map((key) => (isWellFormed(key) ? `${JSON.stringify(key)}:` : undefined)) }
  if (count <= MaxPlannedCount) plans[count] = plan
  return plan
}

/** `{…}` of the object's own enumerable members in JCS order, leaving out `skip` and (as JCS does) undefined values. */
const writeMembers = (object: Record<string, unknown>, depth: number, skip: ReadonlySet<string> | null): string | undefined => {
  const { sorted, prefixes } = planOf(object)
  let out = "{"
  for (let i = 0; i < sorted.length; i++) {
    const key = sorted[i]!
    if (skip !== null && skip.has(key)) continue
    const member = object[key]
    if (member === undefined) continue
    const prefix = prefixes[i]
    if (prefix === undefined || typeof member === "symbol") return undefined
    const text = write(member, depth + 1)
    if (text === undefined) return undefined
    out += out.length === 1 ? prefix + text : `,${prefix}${text}`
  }
  return `${out}}`
}

/** Exactly `canonicalize(value)`: the JCS text, undefined for a value JSON has no text for, or the package's error. */
export const jcs = (value: unknown): string | undefined => write(value, 0) ?? canonicalize(value)

/**
 * The JCS text of a copy of `object` without the members in `omit` (what `canonicalize({ ...rest })`
 * gives after `const { a, b, ...rest } = object`), without making the copy.
 */
export const jcsWithout = (object: Readonly<Record<string, unknown>>, omit: ReadonlySet<string>): string | undefined => {
  if (isPlainObject(object)) {
    const text = writeMembers(object as Record<string, unknown>, 0, omit)
    if (text !== undefined) return text
  }
  // As the rest pattern copies: own enumerable members as data properties ("__proto__" included).
  return canonicalize(Object.fromEntries(Object.keys(object).filter((key) => !omit.has(key)).map((key) => [key, object[key]])))
}
