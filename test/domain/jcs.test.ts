import { describe, expect, it } from "@effect/vitest"
import canonicalize from "canonicalize"
import * as fc from "fast-check"
import { canonicalJson, sha256Hex } from "../../src/domain/Canonical.js"
import { EventHashDomain, eventHashOf } from "../../src/domain/EventChain.js"
import { jcs, jcsWithout } from "../../src/verify/FastJcs.js"

/** What a call gives: its text (or undefined) or the message it throws, so errors are compared too. */
const outcome = (f: () => string | undefined): { text: string | undefined } | { error: string } => {
  try {
    return { text: f() }
  } catch (error) {
    return { error: String((error as Error).message) }
  }
}

// Strings of any UTF-16 code units: lone surrogates, pairs, controls, quotes and backslashes included.
const codeUnits = fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 12 }).map((units) => String.fromCharCode(...units))
const anyString = fc.oneof(fc.string(), fc.fullUnicodeString(), codeUnits, fc.constantFrom("", "\"", "\\", "\u2028", "\u007f", "€", "😀", "\ud800", "\udc00x"))
const numbers = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom(1e21, 1e-7, 1e-6, -0, 0, 5e-324, Number.MAX_VALUE, Number.MAX_SAFE_INTEGER + 2, 0.1 + 0.2, 123456789012345680000, NaN, Infinity, -Infinity)
)
const key = fc.oneof(fc.string({ maxLength: 6 }), anyString, fc.constantFrom("__proto__", "toJSON", "eventHash", "signature", "payload", "10", "2", "a", "B"))
const { value: json } = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: "small", withCrossShrink: true }, fc.constant(null), fc.boolean(), numbers, anyString, tie("array"), tie("object")),
  array: fc.array(tie("value"), { maxLength: 5 }),
  object: fc.dictionary(key, tie("value"), { maxKeys: 6 })
}))
// JSON.parse output: own "__proto__" members and the like, as a feed read from the wire has them.
const parsed = fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as unknown)
const oddities = fc.anything({
  key,
  withBoxedValues: true,
  withMap: true,
  withSet: true,
  withObjectString: true,
  withNullPrototype: true,
  withBigInt: true,
  withDate: true,
  withTypedArray: true,
  withSparseArray: true,
  withUnicodeString: true
})

describe("jcs: exactly the canonicalize package, faster", () => {
  it("gives canonicalize's text or error for plain JSON data, odd numbers, any strings and nesting", () => {
    fc.assert(fc.property(fc.oneof(json, parsed), (value) => {
      expect(outcome(() => jcs(value))).toEqual(outcome(() => canonicalize(value)))
    }), { numRuns: 2000 })
  })

  it("gives canonicalize's text or error for values that are not JSON data (undefined, holes, Dates, Maps, null prototypes, bigints)", () => {
    fc.assert(fc.property(oddities, (value) => {
      expect(outcome(() => jcs(value))).toEqual(outcome(() => canonicalize(value)))
    }), { numRuns: 2000 })
  })

  it("handles the cases JCS is known for", () => {
    expect(jcs({ b: -0, a: 1e21, c: [1e-7, "\u00e9\ud83d\ude00", "\u001f"] })).toBe("{\"a\":1e+21,\"b\":0,\"c\":[1e-7,\"é😀\",\"\\u001f\"]}")
    expect(jcs({ "\u20ac": 1, "\r": 2, "1": 3, "\ud83d\ude00": 4, "\ufb33": 5 })).toBe(canonicalize({ "\u20ac": 1, "\r": 2, "1": 3, "\ud83d\ude00": 4, "\ufb33": 5 }))
    expect(() => jcs({ a: "\ud800" })).toThrow("Lone surrogate")
    expect(() => jcs([NaN])).toThrow("NaN")
    const cycle: Record<string, unknown> = {}
    cycle.self = { cycle }
    expect(() => jcs(cycle)).toThrow("Circular")
  })

  it("remembers sorted member orders per shape without mixing shapes of the same size", () => {
    fc.assert(fc.property(fc.array(fc.dictionary(fc.constantFrom("a", "b", "c", "d", "é", "A"), fc.integer(), { minKeys: 3, maxKeys: 3 }), { minLength: 2, maxLength: 8 }), (objects) => {
      for (const o of objects) expect(jcs(o)).toBe(canonicalize(o))
    }))
  })

  it("jcsWithout is canonicalize of the copy without the omitted members", () => {
    const omit = new Set(["eventHash", "signature"])
    fc.assert(fc.property(fc.oneof(fc.dictionary(key, json, { maxKeys: 8 }), oddities.filter((v) => typeof v === "object" && v !== null)), (value) => {
      const object = value as Record<string, unknown>
      const { eventHash: _h, signature: _s, ...rest } = object
      expect(outcome(() => jcsWithout(object, omit))).toEqual(outcome(() => canonicalize(rest)))
    }), { numRuns: 2000 })
  })

  it("event hashes follow the recipe: hex SHA-256 of the domain and the JCS of the event without eventHash and signature", () => {
    fc.assert(fc.property(fc.dictionary(key, json, { maxKeys: 9 }), json, (event, payload) => {
      const full = { ...event, payload, eventHash: "00", signature: { alg: "Ed25519" } }
      const { eventHash: _h, signature: _s, ...covered } = full
      let expected: string
      try {
        expected = sha256Hex(EventHashDomain + canonicalJson(covered))
      } catch {
        expect(() => eventHashOf(full)).toThrow()
        return
      }
      expect(eventHashOf(full)).toBe(expected)
    }), { numRuns: 1000 })
  })
})
