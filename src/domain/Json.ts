import { ParseResult, Schema } from "effect"

/** A string the database and JCS both keep exactly: no NUL, at most 4096 characters. */
export const Text = Schema.String.pipe(
  Schema.filter((s) => !s.includes("\u0000") || "must not contain NUL characters"),
  Schema.maxLength(4096)
)
export const NonEmptyText = Text.pipe(Schema.minLength(1))

/** Integers JCS prints exactly (contract section 0). */
export const SafeInt = Schema.Number.pipe(
  Schema.filter((n) => Number.isSafeInteger(n) || "must be an integer within ±2^53")
)

export type JsonValue = string | boolean | null | number | ReadonlyArray<JsonValue> | { readonly [k: string]: JsonValue }

/** JSON values made only of what digests may hold: strings, booleans, null, safe integers, arrays, objects. */
export const JsonValue: Schema.Schema<JsonValue> = Schema.Union(
  Text,
  Schema.Boolean,
  Schema.Null,
  SafeInt,
  Schema.Array(Schema.suspend(() => JsonValue)),
  Schema.Record({ key: Schema.String, value: Schema.suspend(() => JsonValue) })
).annotations({ identifier: "JsonValue" })

export const JsonObject = Schema.Record({ key: Schema.String, value: JsonValue })

const Rfc3339Pattern = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i

/**
 * RFC 3339 in, the contract's form out (UTC, milliseconds, `Z`), so digests never depend on how a
 * client wrote the same instant.
 */
export const Timestamp = Schema.transformOrFail(Schema.String, Schema.String, {
  strict: true,
  decode: (input, _, ast) => {
    const ms = Rfc3339Pattern.test(input) ? Date.parse(input) : Number.NaN
    return Number.isNaN(ms)
      ? ParseResult.fail(new ParseResult.Type(ast, input, "must be an RFC 3339 timestamp"))
      : ParseResult.succeed(new Date(ms).toISOString())
  },
  encode: ParseResult.succeed
}).annotations({ identifier: "Timestamp", description: "RFC 3339 UTC timestamp with milliseconds", jsonSchema: { type: "string", format: "date-time" } })

/** A closed set of strings that reports one readable failure instead of one per alternative. */
export const OneOf = <const L extends ReadonlyArray<string>>(identifier: string, values: L) =>
  Schema.Literal(...values).annotations({
    identifier,
    message: () => ({ message: `must be one of ${values.join(", ")}`, override: true })
  })
