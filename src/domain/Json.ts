import { Effect, Schema, SchemaAST, SchemaGetter, SchemaIssue } from "effect"
import { jsonFitOf } from "./JsonFit.js"

/** `String.prototype.isWellFormed` (ES2024, Node 20+): false when `s` holds a lone UTF-16 surrogate. */
type WellFormedCheck = string & { isWellFormed(): boolean }

/**
 * Why PostgreSQL could not keep `s` exactly, if it could not: NUL is refused by text and jsonb columns,
 * and a lone UTF-16 surrogate has no UTF-8 form (it would be stored as U+FFFD, so a digest would cover
 * text the client never sent).
 */
export const unstorableReason = (s: string): string | undefined =>
  s.includes("\u0000") ? "must not contain NUL characters"
  : !(s as WellFormedCheck).isWellFormed() ? "must not contain unpaired UTF-16 surrogates"
  : undefined

const escapePointer = (segment: PropertyKey) => String(segment).replace(/~/g, "~0").replace(/\//g, "~1")

/** RFC 6901 pointer of a path (a decode issue's, say); the root is the empty pointer. */
export const toPointer = (path: ReadonlyArray<PropertyKey>): string => path.map((segment) => "/" + escapePointer(segment)).join("")

/**
 * The JSON pointer (RFC 6901) and reason of the first string, key or value, in `value` that the
 * database cannot keep exactly; undefined when there is none. Depth first, in member order; an object's
 * names are checked (the last one first) before its values. A pointer is built only for what it finds.
 * Recursive: call it on a value whose depth is bounded (the body guard checks `exceedsDepth` first).
 */
export const findUnstorable = (value: unknown): { readonly pointer: string; readonly reason: string } | undefined => {
  const path: Array<string> = []
  const at = (segment: string) => toPointer([...path, segment])
  const visit = (current: unknown): { readonly pointer: string; readonly reason: string } | undefined => {
    if (typeof current === "string") {
      const reason = unstorableReason(current)
      return reason === undefined ? undefined : { pointer: toPointer(path), reason }
    }
    if (typeof current !== "object" || current === null) return undefined
    if (Array.isArray(current)) {
      for (let i = 0; i < current.length; i++) {
        path.push(String(i))
        const found = visit(current[i])
        path.pop()
        if (found !== undefined) return found
      }
      return undefined
    }
    const keys = Object.keys(current)
    for (let i = keys.length - 1; i >= 0; i--) {
      const reason = unstorableReason(keys[i]!)
      if (reason !== undefined) return { pointer: at(keys[i]!), reason: `member names ${reason.slice(5)}` }
    }
    for (const key of keys) {
      path.push(key)
      const found = visit((current as Record<string, unknown>)[key])
      path.pop()
      if (found !== undefined) return found
    }
    return undefined
  }
  return visit(value)
}

/** Deeper documents are refused before any decoding work (no legitimate body nests this far). */
export const MaxJsonDepth = 32

/**
 * Whether JSON text holds at most `limit` `{` and `[` characters (those inside strings counted too). Every
 * array or object opens with one, so a text for which this holds cannot parse to a value that
 * `exceedsDepth(value, limit)`: a cheap bound, read with `indexOf`, that spares small bodies the walk.
 */
export const opensAtMost = (text: string, limit: number): boolean => {
  let count = 0
  for (let at = text.indexOf("{"); at !== -1; at = text.indexOf("{", at + 1)) if (++count > limit) return false
  for (let at = text.indexOf("["); at !== -1; at = text.indexOf("[", at + 1)) if (++count > limit) return false
  return true
}

/**
 * Whether a parsed JSON value nests deeper than `limit` (a scalar is depth 1). Recursion stops one level
 * past the limit, so its depth is bounded whatever the value.
 */
export const exceedsDepth = (value: unknown, limit: number): boolean => {
  const deeper = (current: unknown, depth: number): boolean => {
    if (typeof current !== "object" || current === null) return false
    if (depth > limit) return true
    if (Array.isArray(current)) {
      for (let i = 0; i < current.length; i++) if (deeper(current[i], depth + 1)) return true
    } else {
      for (const key in current) if (deeper((current as Record<string, unknown>)[key], depth + 1)) return true
    }
    return false
  }
  return deeper(value, 1)
}

/** A string the database and JCS both keep exactly: no NUL, no lone surrogate, at most 4096 characters. */
export const Text = Schema.String.check(
  Schema.makeFilter((s: string) => unstorableReason(s) ?? true),
  Schema.isMaxLength(4096)
)
export const NonEmptyText = Text.check(Schema.isMinLength(1))

/** Integers JCS prints exactly (docs/API.md §2). */
export const SafeInt = Schema.Number.check(Schema.isInt({ message: "must be an integer within ±2^53" }))

export type JsonValue = string | boolean | null | number | ReadonlyArray<JsonValue> | { readonly [k: string]: JsonValue }

/** JSON values made only of what digests may hold: strings, booleans, null, safe integers, arrays, objects. */
export const JsonValue: Schema.Codec<JsonValue> = Schema.Union([
  Text,
  Schema.Boolean,
  Schema.Null,
  SafeInt,
  Schema.Array(Schema.suspend((): Schema.Codec<JsonValue> => JsonValue)),
  Schema.Record(Schema.String, Schema.suspend((): Schema.Codec<JsonValue> => JsonValue))
]).annotate({ identifier: "JsonValue" })

export const JsonObject = Schema.Record(Schema.String, JsonValue)

const Rfc3339Pattern = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i

/**
 * RFC 3339 in, the form of docs/API.md §2 out (UTC, milliseconds, `Z`), so digests never depend on how a
 * client wrote the same instant.
 */
export const Timestamp = Schema.String.annotate({
  identifier: "Timestamp",
  description: "RFC 3339 UTC timestamp with milliseconds",
  format: "date-time"
}).pipe(
  Schema.decodeTo(Schema.String, {
    decode: SchemaGetter.transformEffect((input: string) => {
      const ms = Rfc3339Pattern.test(input) ? Date.parse(input) : Number.NaN
      return Number.isNaN(ms)
        ? Effect.fail(new SchemaIssue.InvalidValue({ message: "must be an RFC 3339 timestamp" }, input))
        : Effect.succeed(new Date(ms).toISOString())
    }),
    encode: SchemaGetter.passthrough()
  })
)

/** A closed set of strings that reports one readable failure instead of one per alternative. */
export const OneOf = <const L extends ReadonlyArray<string>>(identifier: string, values: L) =>
  Schema.Literals(values).annotate({ identifier, message: `must be one of ${values.join(", ")}` })

/**
 * A JSON body as HttpApi writes one from the success schema an endpoint declares (the schema's JSON codec,
 * then `JSON.stringify`), for handlers that build their own response: a body encoded once and sent many
 * times (trust documents, receipts), or a status HttpApi cannot choose. Stricter than HttpApi: a member the
 * schema does not declare throws instead of being dropped. Members come out in the schema's order. Throws
 * a SchemaError when the value does not fit.
 */
export const jsonTextEncoder = <S extends Schema.Top & { readonly EncodingServices: never }>(schema: S) => {
  const codec = Schema.toCodecJson(schema)
  const encode = Schema.encodeSync(codec, { onExcessProperty: "error" })
  const encodeText = (value: S["Type"]): string => JSON.stringify(encode(value))
  // The same text, cheaper: where the schema's JSON encoding is the identity, a value that fits and is laid
  // out as the encoder would lay out its copy is its own text (JsonFit.ts). Otherwise the encoder runs (and
  // throws its own error for a value that does not fit).
  const fit = jsonFitOf(SchemaAST.flip(codec.ast))
  if (fit === undefined) return encodeText
  return (value: S["Type"]): string => {
    let plain: boolean
    try {
      plain = fit(value)
    } catch {
      return encodeText(value)
    }
    return plain ? JSON.stringify(value) : encodeText(value)
  }
}

interface Frame {
  readonly array: boolean
  /** Member names seen so far (objects), or the next element's index (arrays). */
  readonly names: Set<string>
  index: number
  /** The member or element being read: its pointer segment. */
  segment: string
  /** Objects: true while the next string is a member name. */
  expectName: boolean
}

/**
 * The JSON pointer of the first member whose name repeats an earlier member of the same object, in a
 * text that `JSON.parse` accepted; undefined when every name is unique. I-JSON (RFC 7493 §2.3) forbids
 * duplicates: parsers disagree on which value wins, so a digest over the last value could be checked by
 * a relying party that kept the first. Names are compared after unescaping (`"a"` and `"\u0061"` clash).
 */
export const findDuplicateMember = (text: string): string | undefined => {
  const stack: Array<Frame> = []
  const pointer = () => stack.map((frame) => "/" + escapePointer(frame.segment)).join("")
  const n = text.length
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22 /* " */) {
      let j = i + 1
      let escaped = false
      while (j < n) {
        const d = text.charCodeAt(j)
        if (d === 0x5c /* \ */) {
          escaped = true
          j += 2
        } else if (d === 0x22) break
        else j++
      }
      const top = stack[stack.length - 1]
      if (top !== undefined && !top.array && top.expectName) {
        const name = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j)
        top.segment = name
        if (top.names.has(name)) return pointer()
        top.names.add(name)
        top.expectName = false
      }
      i = j
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      stack.push({ array: c === 0x5b, names: new Set(), index: 0, segment: "0", expectName: c === 0x7b })
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop()
    } else if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1]
      if (top === undefined) continue
      if (top.array) top.segment = String(++top.index)
      else top.expectName = true
    }
  }
  return undefined
}

/** Members written in a JSON text that `JSON.parse` accepted: one name separator (`:`) outside strings each. */
const membersWritten = (text: string): number => {
  let count = 0
  let i = 0
  for (;;) {
    const quote = text.indexOf("\"", i)
    const end = quote === -1 ? text.length : quote
    for (let colon = text.indexOf(":", i); colon !== -1 && colon < end; colon = text.indexOf(":", colon + 1)) count++
    if (quote === -1) return count
    // The closing quote is the first one after an even run of backslashes.
    let close = quote
    for (;;) {
      close = text.indexOf("\"", close + 1)
      let backslashes = 0
      while (text.charCodeAt(close - 1 - backslashes) === 0x5c) backslashes++
      if (backslashes % 2 === 0) break
    }
    i = close + 1
  }
}

/** How deep `membersParsed` recurses before it gives up (a deeper body is refused for its depth anyway). */
const MembersMaxDepth = 256

/** Members of the parsed value: each object's distinct names; -1 when it nests deeper than MembersMaxDepth. */
const membersParsed = (value: unknown, depth = 1): number => {
  if (typeof value !== "object" || value === null) return 0
  if (depth > MembersMaxDepth) return -1
  let count = 0
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const inner = membersParsed(value[i], depth + 1)
      if (inner < 0) return -1
      count += inner
    }
  } else {
    for (const key in value) {
      const inner = membersParsed((value as Record<string, unknown>)[key], depth + 1)
      if (inner < 0) return -1
      count += 1 + inner
    }
  }
  return count
}

/**
 * `findDuplicateMember(text)` for a text already parsed to `parsed`, cheaply when no name repeats (every
 * body, nearly): a parser keeps one member per distinct name, so the text holds a duplicate exactly when
 * it writes more members than `parsed` has. Only then (or for a value too deep to count) is the text
 * scanned for where.
 */
export const duplicateMemberOf = (text: string, parsed: unknown): string | undefined =>
  membersWritten(text) === membersParsed(parsed) ? undefined : findDuplicateMember(text)
