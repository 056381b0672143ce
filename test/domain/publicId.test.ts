import { describe, expect, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import * as fc from "fast-check"
import { isPublicId, PublicId } from "../../src/domain/PublicId.js"

/**
 * docs/API.md §2, written out by hand rather than as the regular expression the code uses:
 * `DET-V1-` or `QUAL-V1-`, then 1..64 characters of A-Z 0-9 and `-`, neither first nor last a hyphen.
 */
const oracle = (input: string): boolean => {
  const prefix = ["DET-V1-", "QUAL-V1-"].find((p) => input.startsWith(p))
  if (prefix === undefined) return false
  const rest = input.slice(prefix.length)
  if (rest.length < 1 || rest.length > 64) return false
  if (rest.startsWith("-") || rest.endsWith("-")) return false
  return [...rest].every((c) => /^[A-Z0-9-]$/.test(c))
}

const decodes = (input: unknown) => Result.isSuccess(Schema.decodeUnknownResult(PublicId)(input))

const alnum = fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
const inner = fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
const prefix = fc.constantFrom("DET-V1-", "QUAL-V1-")

/** Generated from the grammar: every one of these is a valid publicId. */
const validPublicId = fc.oneof(
  fc.tuple(prefix, alnum).map(([p, c]) => p + c),
  fc.tuple(prefix, alnum, fc.array(inner, { maxLength: 62 }), alnum).map(([p, a, mid, z]) => p + a + mid.join("") + z)
)

/** Strings near the grammar: right and wrong prefixes, characters just outside the alphabet, any length. */
const nearMiss = fc.tuple(
  fc.constantFrom("DET-V1-", "QUAL-V1-", "DET-V2-", "det-v1-", "QUAL-V1", "DET-", "", "XDET-V1-", "DET_V1-", "DET-V1--"),
  fc.array(fc.constantFrom(..."AZ09-az_. /\n\u00c4\u0000"), { maxLength: 70 })
).map(([p, rest]) => p + rest.join(""))

describe("publicId", () => {
  it("accepts the examples docs/API.md and the tests use", () => {
    for (const id of ["DET-V1-ACME-0001", "QUAL-V1-X", "DET-V1-0", "DET-V1-A-B", "QUAL-V1-ACME-ROBOTICS-0001", "DET-V1-A--B"]) {
      expect(isPublicId(id), id).toBe(true)
      expect(decodes(id), id).toBe(true)
    }
  })

  it("rejects malformed identifiers", () => {
    for (const id of [
      "", "DET-V1-", "QUAL-V1-", "DET-V1--A", "DET-V1-A-", "DET-V1-abc", "det-v1-ABC", "DET-V2-ABC", "DET-V1_ABC",
      "DETV1-ABC", "QUA-V1-ABC", "DET-V1-A B", "DET-V1-A/B", "DET-V1-A.B", " DET-V1-ABC", "DET-V1-ABC ", "DET-V1-ABC\n",
      "DET-V1-ÄBC", "DET-V1-A\u0000", "XDET-V1-ABC", "DET-V1-ABC/../x", "DET-V1-%41"
    ]) {
      expect(isPublicId(id), JSON.stringify(id)).toBe(false)
      expect(decodes(id), JSON.stringify(id)).toBe(false)
    }
  })

  it("allows at most 64 characters after the prefix", () => {
    for (const p of ["DET-V1-", "QUAL-V1-"]) {
      expect(isPublicId(p + "A")).toBe(true)
      expect(isPublicId(p + "AB")).toBe(true)
      expect(isPublicId(p + "A".repeat(63))).toBe(true)
      expect(isPublicId(p + "A".repeat(64))).toBe(true)
      expect(isPublicId(p + "A" + "-".repeat(62) + "Z")).toBe(true)
      expect(isPublicId(p + "A".repeat(65))).toBe(false)
      expect(isPublicId(p + "A" + "-".repeat(63) + "Z")).toBe(false)
      expect(decodes(p + "9".repeat(64))).toBe(true)
      expect(decodes(p + "9".repeat(65))).toBe(false)
    }
  })

  it("rejects what is not a string", () => {
    for (const value of [undefined, null, 42, ["DET-V1-A"], { id: "DET-V1-A" }]) expect(decodes(value)).toBe(false)
  })

  it("accepts every identifier the grammar generates", () => fc.assert(fc.property(validPublicId, (id) => {
    expect(isPublicId(id)).toBe(true)
    expect(decodes(id)).toBe(true)
  })))

  it("agrees with the rule of docs/API.md §2 on near-miss strings", () => fc.assert(fc.property(nearMiss, (candidate) => {
    expect(isPublicId(candidate)).toBe(oracle(candidate))
    expect(decodes(candidate)).toBe(oracle(candidate))
  }), { numRuns: 2000 }))

  it("rejects a valid identifier after any corruption that breaks the rule", () => fc.assert(fc.property(
    validPublicId,
    fc.nat(),
    fc.constantFrom("a", "z", "_", " ", ".", "/", "\u00c4", "\u0000", "é"), (id, at, bad) => {
    const i = at % id.length
    const corrupted = id.slice(0, i) + bad + id.slice(i + 1)
    expect(isPublicId(corrupted)).toBe(false)
    expect(isPublicId(id + bad)).toBe(false)
  })))

  it("rejects a hyphen at either end of the part after the prefix", () => fc.assert(fc.property(validPublicId, (id) => {
    const p = id.startsWith("DET") ? "DET-V1-" : "QUAL-V1-"
    const rest = id.slice(p.length)
    expect(isPublicId(p + "-" + rest)).toBe(false)
    expect(isPublicId(id + "-")).toBe(false)
  })))

  it("rejects anything longer than 64 characters after the prefix", () => fc.assert(fc.property(
    prefix,
    fc.array(alnum, { minLength: 65, maxLength: 200 }), (p, chars) => {
    expect(isPublicId(p + chars.join(""))).toBe(false)
    expect(isPublicId(p + chars.slice(0, 64).join(""))).toBe(true)
  })))
})
