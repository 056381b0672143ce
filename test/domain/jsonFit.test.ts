import { Schema, SchemaAST } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { jsonTextEncoder } from "../../src/domain/Json.js"
import { jsonFitOf } from "../../src/domain/JsonFit.js"
import { MachineTrustResponse } from "../../src/domain/MachineTrust.js"
import { CreatedRelianceReceipt, NewRelianceReceipt, RelianceReceipt, ReplayedRelianceReceipt } from "../../src/domain/Receipt.js"
import { ReceiptProofBundle } from "../../src/log/Api.js"
import { IngestResultSchema } from "../../src/trust/DeterminationsApi.js"
import { buildLog, bundleFor, signedReceiptOf } from "../log/logs.js"

// jsonTextEncoder's fast path against the schema's own JSON encoder: the same text, or both throw.

const outcome = (run: () => string): string => {
  try {
    return `text ${run()}`
  } catch {
    return "throws"
  }
}

/** Today's encoder: the schema's JSON codec, then JSON.stringify. */
const encoderOf = (schema: Schema.Top) => {
  const encode = Schema.encodeUnknownSync(Schema.toCodecJson(schema as Schema.Codec<unknown, unknown>), { onExcessProperty: "error" })
  return (value: unknown) => JSON.stringify(encode(value))
}

const fitOf = (schema: Schema.Top) => jsonFitOf(SchemaAST.flip(Schema.toCodecJson(schema as Schema.Codec<unknown, unknown>).ast))

/**
 * The fit against the encoder: it throws exactly when the encoder does, and when it answers true the
 * value's own JSON.stringify is the encoder's text. Returns whether the value took the fast path.
 */
const agrees = (schema: Schema.Top, value: unknown): boolean => {
  const fit = fitOf(schema)!
  const expected = outcome(() => encoderOf(schema)(value))
  let plain: boolean
  try {
    plain = fit(value)
  } catch {
    expect(expected).toBe("throws")
    return false
  }
  expect(expected).not.toBe("throws")
  if (plain) expect(`text ${JSON.stringify(value)}`).toBe(expected)
  expect(outcome(() => jsonTextEncoder(schema as never)(value as never))).toBe(expected)
  return plain
}

const junk: fc.Arbitrary<unknown> = fc.oneof(
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.integer(),
  fc.constantFrom(-0, 0.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60, true, false, null, undefined, "", "\"\\\u0000\ud800"),
  fc.constant([]),
  fc.constant({}),
  fc.constant({ toJSON: () => "x" }),
  fc.constant(new Date(0))
)

/** Paths to every member and element of a JSON-like value. */
const pathsOf = (value: unknown, path: Array<string | number> = []): Array<Array<string | number>> => {
  if (typeof value !== "object" || value === null) return [path]
  const inner = Array.isArray(value)
    ? value.flatMap((v, i) => pathsOf(v, [...path, i]))
    : Object.keys(value).flatMap((k) => pathsOf((value as Record<string, unknown>)[k], [...path, k]))
  return [path, ...inner]
}

type Mutation = (value: unknown, pick: number, extra: unknown) => unknown
const copyWith = (value: unknown, path: ReadonlyArray<string | number>, f: (v: unknown) => unknown): unknown => {
  if (path.length === 0) return f(value)
  const [head, ...tail] = path
  if (Array.isArray(value)) return value.map((v, i) => i === head ? copyWith(v, tail, f) : v)
  const record = value as Record<string, unknown>
  return Object.fromEntries(Object.keys(record).map((k) => [k, k === head ? copyWith(record[k], tail, f) : record[k]]))
}
const at = (value: unknown, path: ReadonlyArray<string | number>) => path.reduce((v, s) => (v as Record<string | number, unknown>)[s], value)
const onObject = (f: (o: Record<string, unknown>, extra: unknown) => unknown): Mutation => (value, pick, extra) => {
  const objects = pathsOf(value).filter((p) => {
    const v = at(value, p)
    return typeof v === "object" && v !== null && !Array.isArray(v)
  })
  if (objects.length === 0) return value
  return copyWith(value, objects[pick % objects.length]!, (o) => f(o as Record<string, unknown>, extra))
}
const onArray = (f: (a: Array<unknown>, extra: unknown) => unknown): Mutation => (value, pick, extra) => {
  const arrays = pathsOf(value).filter((p) => Array.isArray(at(value, p)))
  if (arrays.length === 0) return value
  return copyWith(value, arrays[pick % arrays.length]!, (a) => f(a as Array<unknown>, extra))
}

/** Ways a value may stop fitting, or stop being laid out as the encoder's copy. */
const mutations: ReadonlyArray<Mutation> = [
  (value, pick, extra) => {
    const paths = pathsOf(value)
    return copyWith(value, paths[pick % paths.length]!, () => extra)
  },
  onObject((o, extra) => ({ ...o, extra_member: extra })),
  onObject((o) => Object.fromEntries(Object.entries(o).slice(1))),
  onObject((o) => Object.fromEntries(Object.entries(o).reverse())),
  onObject((o) => {
    const [first, ...rest] = Object.entries(o)
    return first === undefined ? o : Object.assign(Object.create({ [first[0]]: first[1] }) as object, Object.fromEntries(rest))
  }),
  onObject((o) => Object.defineProperty({ ...o }, Object.keys(o)[0] ?? "x", { enumerable: false })),
  onObject((o) => ({ ...o, [Symbol.for("s")]: 1 })),
  onObject((o) => Object.defineProperty({ ...o }, Symbol.for("hidden"), { value: 1, enumerable: false })),
  onObject((o) => ({ ...o, toJSON: () => ({}) })),
  onObject((o) => Object.setPrototypeOf({ ...o }, { toJSON: () => ({}) }) as unknown),
  onArray((a) => Object.assign([...a], { toJSON: () => [] })),
  onArray((a, extra) => [...a, extra]),
  onArray((a) => [...a, ...a]),
  onArray((a) => a.slice(1)),
  onArray((a) => {
    const holes = [...a]
    delete holes[0]
    return holes
  })
]

const mutated = (valid: fc.Arbitrary<unknown>) =>
  fc.tuple(valid, fc.array(fc.tuple(fc.nat({ max: mutations.length - 1 }), fc.nat(), junk), { maxLength: 2 })).map(([value, steps]) =>
    steps.reduce((v, [m, pick, extra]) => mutations[m]!(v, pick, extra), value)
  )

/** A generated schema of the supported shapes with values that fit it. */
interface Case {
  readonly schema: Schema.Top
  readonly value: fc.Arbitrary<unknown>
}

const text = fc.string({ unit: "binary", maxLength: 5 })
const leaf: fc.Arbitrary<Case> = fc.constantFrom<Case>(
  { schema: Schema.String, value: text },
  { schema: Schema.String.check(Schema.isMinLength(2)), value: text },
  { schema: Schema.String.check(Schema.isPattern(/^[a-c]*$/), Schema.isMaxLength(3)), value: fc.stringMatching(/^[a-c]{0,4}$/) },
  { schema: Schema.Int, value: fc.oneof(fc.integer(), fc.constantFrom(-0, 0.5, 2 ** 60)) },
  { schema: Schema.Number.check(Schema.isFinite()), value: fc.double() },
  { schema: Schema.Boolean, value: fc.boolean() },
  { schema: Schema.Null, value: fc.constant(null) },
  { schema: Schema.Literal("a\"b"), value: fc.constant("a\"b") },
  { schema: Schema.Literal(0), value: fc.constantFrom(0, -0) },
  { schema: Schema.Literals(["x", 1, true]), value: fc.constantFrom("x", 1, true, "y") },
  { schema: Schema.NullOr(Schema.String), value: fc.option(text, { nil: null }) },
  { schema: Schema.Union([Schema.String.check(Schema.isMaxLength(2)), Schema.String.check(Schema.isMinLength(1))], { mode: "oneOf" }), value: text },
  { schema: Schema.Union([Schema.String, Schema.Int, Schema.Null]), value: fc.oneof(text, fc.integer(), fc.constant(null)) }
)
const names = fc.constantFrom("a", "b", "b2", "1", "10", "__proto__", "toString", "k\"")
const { node } = fc.letrec<{ node: Case }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.uniqueArray(fc.tuple(names, tie("node"), fc.boolean()), { minLength: 1, maxLength: 4, selector: ([n]) => n }).map((members): Case => ({
      schema: Schema.Struct(Object.fromEntries(members.map(([n, c, optional]) => [n, optional ? Schema.optionalKey(c.schema as Schema.Codec<unknown>) : c.schema]))),
      value: fc.tuple(...members.map(([n, c, optional]) => fc.tuple(fc.constant(n), c.value, fc.boolean().map((drop) => optional && drop)))).map((entries) => {
        const o: Record<string, unknown> = {}
        for (const [n, v, drop] of entries) if (!drop) Object.defineProperty(o, n, { value: v, enumerable: true, writable: true, configurable: true })
        return o
      })
    })),
    tie("node").map((c): Case => ({ schema: Schema.Array(c.schema as Schema.Codec<unknown>), value: fc.array(c.value, { maxLength: 3 }) })),
    tie("node").map((c): Case => ({ schema: Schema.Array(c.schema as Schema.Codec<unknown>).check(Schema.isMaxLength(2)), value: fc.array(c.value, { maxLength: 3 }) })),
    fc.tuple(tie("node"), tie("node")).map(([a, b]): Case => ({
      schema: Schema.Tuple([a.schema as Schema.Codec<unknown>, b.schema as Schema.Codec<unknown>]),
      value: fc.tuple(a.value, b.value)
    }))
  )
}))

describe("jsonTextEncoder's fast path (JsonFit)", () => {
  it("holds for generated schemas: the encoder's text for values that fit, a throw for those that do not", () => {
    let fast = 0
    fc.assert(
      fc.property(node.chain((c) => fc.tuple(fc.constant(c.schema), fc.oneof(c.value, mutated(c.value)))), ([schema, value]) => {
        expect(fitOf(schema)).toBeDefined()
        if (agrees(schema, value)) fast++
      }),
      { numRuns: 1500 }
    )
    expect(fast).toBeGreaterThan(300)
  })

  const receipt = signedReceiptOf(7)
  const real: ReadonlyArray<readonly [string, Schema.Top, fc.Arbitrary<unknown>]> = [
    ["RelianceReceipt", RelianceReceipt, fc.nat({ max: 1000 }).map((n) => signedReceiptOf(n))],
    ["NewRelianceReceipt", NewRelianceReceipt, fc.nat({ max: 1000 }).map((n) => ({ ...signedReceiptOf(n), idempotent: false }))],
    ["ReplayedRelianceReceipt", ReplayedRelianceReceipt, fc.nat({ max: 1000 }).map((n) => ({ ...signedReceiptOf(n), idempotent: true }))],
    ["CreatedRelianceReceipt", CreatedRelianceReceipt, fc.boolean().map((idempotent) => ({ ...receipt, idempotent }))],
    ["ReceiptProofBundle", ReceiptProofBundle, fc.tuple(fc.nat({ max: 3 }), fc.boolean()).map(([i, key]) => bundleFor(buildLog(12), i * 3, key))],
    ["IngestResult", IngestResultSchema, fc.record({
      outcome: fc.constantFrom("created", "updated", "unchanged"),
      public_id: text,
      determination_id: text,
      determination_digest: text,
      version: fc.integer(),
      changed_fields: fc.array(text, { maxLength: 3 })
    })]
  ]
  for (const [name, schema, values] of real) {
    it(`holds for ${name}, its values and their mutations`, () => {
      expect(fitOf(schema)).toBeDefined()
      fc.assert(fc.property(values, (value) => {
        expect(agrees(schema, value)).toBe(true)
      }), { numRuns: 30 })
      fc.assert(fc.property(mutated(values), (value) => void agrees(schema, value)), { numRuns: 300 })
    })
  }

  it("writes a real receipt as the encoder does, and throws as it does for one that does not fit", () => {
    const created = { ...signedReceiptOf(1), idempotent: false as const }
    const text = jsonTextEncoder(NewRelianceReceipt)(created)
    expect(text).toBe(encoderOf(NewRelianceReceipt)(created))
    expect(Object.keys(JSON.parse(text) as object)).toEqual(Object.keys(NewRelianceReceipt.fields))
    const reordered = Object.fromEntries(Object.entries(created).reverse()) as typeof created
    expect(jsonTextEncoder(NewRelianceReceipt)(reordered)).toBe(text)
    // The encoder's own error: ReceiptBodies.bodyOf logs it and sends the stored JSON.
    const errorOf = (run: () => unknown) => {
      try {
        run()
      } catch (error) {
        return error
      }
      throw new Error("did not throw")
    }
    for (const edited of [{ ...signedReceiptOf(1), tier: "T9" }, { ...signedReceiptOf(1), extra: 1 }, { ...signedReceiptOf(1), verdicts: [{}] }]) {
      const error = errorOf(() => jsonTextEncoder(RelianceReceipt)(edited as never))
      expect(error).toBeInstanceOf(Error)
      expect(String(error)).toBe(String(errorOf(() => encoderOf(RelianceReceipt)(edited))))
    }
    const bundle = bundleFor(buildLog(12), 3, true)
    expect(jsonTextEncoder(ReceiptProofBundle)(bundle)).toBe(encoderOf(ReceiptProofBundle)(bundle))
  })

  it("leaves schemas outside the subset to the encoder", () => {
    expect(fitOf(MachineTrustResponse)).toBeUndefined() // JsonObject (suspend) and Timestamp (a transformation)
    expect(fitOf(Schema.Number)).toBeUndefined() // its JSON codec writes NaN and ±Infinity as strings
    expect(fitOf(Schema.Struct({}))).toBeUndefined()
    expect(fitOf(Schema.Record(Schema.String, Schema.String))).toBeUndefined()
    expect(fitOf(Schema.Literal(1n))).toBeUndefined()
    expect(fitOf(Schema.Array(Schema.String).check(Schema.makeFilter((a: ReadonlyArray<string>) => a.length !== 1)))).toBeUndefined()
  })
})
