import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import { canonicalJson, DigestPattern, digestOf, sha256Hex } from "../../src/domain/Canonical.js"

type Json = string | boolean | null | number | Array<Json> | { [k: string]: Json }

/** What digested objects may hold (docs/API.md §2): strings, booleans, null, safe integers, arrays, objects. */
const { json } = fc.letrec<{ json: Json }>((tie) => ({
  json: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.string({ unit: "binary", maxLength: 12 }),
    fc.boolean(),
    fc.constant(null),
    fc.maxSafeInteger(),
    fc.array(tie("json"), { maxLength: 4 }),
    fc.dictionary(fc.string({ unit: "binary", maxLength: 8 }), tie("json"), { maxKeys: 5 })
  )
}))
const jsonObject = fc.dictionary(fc.string({ unit: "binary", maxLength: 8 }), json, { minKeys: 1, maxKeys: 6 })

/** The same value with every object's keys inserted in another order. */
const reorder = (value: Json, seed: number): Json => {
  if (Array.isArray(value)) return value.map((v, i) => reorder(v, seed + i))
  if (value === null || typeof value !== "object") return value
  const keys = Object.keys(value)
  const shuffled = keys.map((k, i) => ({ k, r: Math.sin(seed * 7919 + i * 104729) })).sort((a, b) => a.r - b.r)
  const out: Record<string, Json> = {}
  for (const { k } of shuffled) out[k] = reorder(value[k]!, seed + 1)
  return out
}

/** Every leaf of a JSON value with its path, and a function that puts a new value at a path. */
const leaves = (value: Json, path: Array<string | number> = []): Array<Array<string | number>> => {
  if (Array.isArray(value)) return value.length === 0 ? [path] : value.flatMap((v, i) => leaves(v, [...path, i]))
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value)
    return keys.length === 0 ? [path] : keys.flatMap((k) => leaves(value[k]!, [...path, k]))
  }
  return [path]
}
const setAt = (value: Json, path: ReadonlyArray<string | number>, next: Json): Json => {
  if (path.length === 0) return next
  const [head, ...rest] = path
  if (Array.isArray(value)) return value.map((v, i) => (i === head ? setAt(v, rest, next) : v))
  const obj = value as Record<string, Json>
  const out: Record<string, Json> = {}
  for (const k of Object.keys(obj)) out[k] = k === head ? setAt(obj[k]!, rest, next) : obj[k]!
  return out
}
const getAt = (value: Json, path: ReadonlyArray<string | number>): Json =>
  path.reduce<Json>((v, key) => (v as any)[key], value)

/** Structural equality that, like JSON, does not care about key order. */
const sameJson = (a: Json, b: Json): boolean => {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameJson(x, b[i]!))
  }
  if (a !== null && b !== null && typeof a === "object" && typeof b === "object") {
    const ka = Object.keys(a).sort()
    const kb = Object.keys(b).sort()
    return ka.length === kb.length && ka.every((k, i) => k === kb[i] && sameJson(a[k]!, b[k]!))
  }
  return Object.is(a, b) || (a === 0 && b === 0)
}

describe("canonical JSON (RFC 8785)", () => {
  it("sorts keys by UTF-16 code units, as RFC 8785 section 3.2.3 shows", () => {
    const input = {
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis"
    }
    expect(canonicalJson(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
      '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    )
  })

  it("prints no whitespace, integers plainly and only the escapes JSON requires", () => {
    expect(canonicalJson({ b: [1, -2, 9007199254740991], a: { y: null, x: true }, c: "\u0001\"\\/é" }))
      .toBe('{"a":{"x":true,"y":null},"b":[1,-2,9007199254740991],"c":"\\u0001\\"\\\\/é"}')
  })

  it("refuses values with no JSON form", () => {
    expect(() => canonicalJson(undefined)).toThrow()
  })

  it("is a fixed point: canonical JSON parsed and canonicalised again is the same text", () => fc.assert(fc.property(json, (value) => {
    const text = canonicalJson(value)
    expect(canonicalJson(JSON.parse(text))).toBe(text)
    expect(sameJson(JSON.parse(text), value)).toBe(true)
  })))
})

describe("digestOf", () => {
  it("is SHA-256 (lowercase hex) of the canonical JSON", () => {
    // sha256('{"a":1,"b":2}')
    const expected = createHash("sha256").update('{"a":1,"b":2}', "utf8").digest("hex")
    expect(digestOf({ b: 2, a: 1 })).toBe(expected)
    expect(digestOf([])).toBe(createHash("sha256").update("[]").digest("hex"))
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  })

  it("gives the same input the same digest", () => fc.assert(fc.property(json, (value) => {
    const digest = digestOf(value)
    expect(digest).toMatch(DigestPattern)
    expect(digest).toMatch(/^[0-9a-f]{64}$/)
    expect(digestOf(value)).toBe(digest)
    expect(digestOf(structuredClone(value))).toBe(digest)
    expect(digest).toBe(sha256Hex(canonicalJson(value)))
  })))

  it("does not depend on the order of object keys", () => fc.assert(fc.property(json, fc.integer(), (value, seed) => {
    expect(digestOf(reorder(value, seed))).toBe(digestOf(value))
  })))

  it("changes when any leaf changes", () => fc.assert(fc.property(json, fc.nat(), json, (value, pick, replacement) => {
    const paths = leaves(value)
    const path = paths[pick % paths.length]!
    fc.pre(!sameJson(getAt(value, path), replacement))
    expect(digestOf(setAt(value, path, replacement))).not.toBe(digestOf(value))
  }), { numRuns: 500 }))

  it("changes when a field is added, removed or renamed", () => fc.assert(fc.property(jsonObject, fc.string({ maxLength: 8 }), json, (obj, name, value) => {
    const [first] = Object.keys(obj)
    const { [first!]: removedValue, ...without } = obj
    expect(digestOf(without)).not.toBe(digestOf(obj))
    fc.pre(!(name in obj))
    expect(digestOf({ ...obj, [name]: value })).not.toBe(digestOf(obj))
    expect(digestOf({ ...without, [name]: removedValue! })).not.toBe(digestOf(obj))
  })))

  it("distinguishes values that only differ in type", () => {
    const variants: Array<Json> = [
      { a: 1 }, { a: "1" }, { a: true }, { a: "true" }, { a: null }, { a: "null" }, {}, { a: [] }, { a: {} }, { a: [1] },
      [{ a: 1 }], { A: 1 }, { a: 0 }, { a: -1 }, { a: "" }
    ]
    const digests = new Set(variants.map(digestOf))
    expect(digests.size).toBe(variants.length)
  })

  it("is sensitive to array order", () => {
    expect(digestOf(["a", "b"])).not.toBe(digestOf(["b", "a"]))
  })
})
