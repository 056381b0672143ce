import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import { duplicateMemberOf, exceedsDepth, findDuplicateMember, findUnstorable, opensAtMost, toPointer, unstorableReason } from "../../src/domain/Json.js"

/** A JSON document whose objects are entry lists, so a test can write one with a repeated name. */
type Doc = string | number | boolean | null | { readonly arr: ReadonlyArray<Doc> } | { readonly obj: ReadonlyArray<readonly [string, Doc]> }

const name = fc.string({ unit: "binary", maxLength: 6 })
const { doc } = fc.letrec<{ doc: Doc }>((tie) => ({
  doc: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.string({ unit: "binary", maxLength: 8 }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("doc"), { maxLength: 4 }).map((arr) => ({ arr })),
    fc.uniqueArray(fc.tuple(name, tie("doc")), { maxLength: 5, selector: ([k]) => k }).map((obj) => ({ obj }))
  )
}))

/** Names escaped as \uXXXX when `escapeNames`, and white space between every token when `spaced`. */
const write = (value: Doc, escapeNames: boolean, spaced: boolean): string => {
  const ws = spaced ? " \n\t" : ""
  if (value === null || typeof value !== "object") return JSON.stringify(value)
  if ("arr" in value) return `[${ws}${value.arr.map((v) => write(v, escapeNames, spaced)).join(`${ws},${ws}`)}${ws}]`
  const key = (k: string) => escapeNames ? `"${[...k].map((ch) => [...ch].length === 1 && ch.length === 1 ? `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}` : JSON.stringify(ch).slice(1, -1)).join("")}"` : JSON.stringify(k)
  return `{${ws}${value.obj.map(([k, v]) => `${key(k)}${ws}:${ws}${write(v, escapeNames, spaced)}`).join(`${ws},${ws}`)}${ws}}`
}

/** Every non-empty object in `value` with its path. */
const objectsOf = (value: Doc, path: Array<string> = []): Array<{ path: Array<string>; entries: ReadonlyArray<readonly [string, Doc]> }> => {
  if (value === null || typeof value !== "object") return []
  if ("arr" in value) return value.arr.flatMap((v, i) => objectsOf(v, [...path, String(i)]))
  const here = value.obj.length > 0 ? [{ path, entries: value.obj }] : []
  return [...here, ...value.obj.flatMap(([k, v]) => objectsOf(v, [...path, k]))]
}

/** `value` with `extra` appended to the object at `path`. */
const withMember = (value: Doc, path: ReadonlyArray<string>, extra: readonly [string, Doc]): Doc => {
  if (value === null || typeof value !== "object") return value
  if (path.length === 0 && "obj" in value) return { obj: [...value.obj, extra] }
  const [head, ...rest] = path
  if ("arr" in value) return { arr: value.arr.map((v, i) => (String(i) === head ? withMember(v, rest, extra) : v)) }
  return { obj: value.obj.map(([k, v]) => [k, k === head ? withMember(v, rest, extra) : v] as const) }
}

describe("duplicate member names (I-JSON)", () => {
  it("finds none in any document whose objects have unique names, however it is written", () => {
    fc.assert(fc.property(doc, fc.boolean(), fc.boolean(), (value, escapeNames, spaced) => {
      const text = write(value, escapeNames, spaced)
      expect(findDuplicateMember(text)).toBeUndefined()
      expect(duplicateMemberOf(text, JSON.parse(text))).toBeUndefined()
    }), { seed: 7493, numRuns: 400 })
  })

  it("points at a repeated name wherever it stands, escaped or not", () => {
    const withDuplicate = doc.chain((value) => {
      const objects = objectsOf(value)
      if (objects.length === 0) return fc.constant(undefined)
      return fc.tuple(fc.constantFrom(...objects), fc.nat(), doc).map(([target, pick, extra]) => {
        const repeated = target.entries[pick % target.entries.length]![0]
        return { value: withMember(value, target.path, [repeated, extra]), pointer: toPointer([...target.path, repeated]) }
      })
    })
    fc.assert(fc.property(withDuplicate, fc.boolean(), fc.boolean(), (c, escapeNames, spaced) => {
      if (c === undefined) return
      const text = write(c.value, escapeNames, spaced)
      expect(findDuplicateMember(text)).toBe(c.pointer)
      expect(duplicateMemberOf(text, JSON.parse(text))).toBe(c.pointer)
    }), { seed: 8259, numRuns: 400 })
  })

  it("compares names after unescaping and ignores look-alikes inside strings", () => {
    expect(findDuplicateMember(`{"organization":"Acme","organization":"Evil"}`)).toBe("/organization")
    expect(findDuplicateMember(`{"a":1,"\\u0061":2}`)).toBe("/a")
    expect(findDuplicateMember(`{"a":"\\",\\"a\\":","b":{"a":1}}`)).toBeUndefined()
    expect(findDuplicateMember(`[{"x":1},{"x":2},{"y":[1,{"z":1,"z":2}]}]`)).toBe("/2/y/1/z")
    expect(findDuplicateMember(`{"a/b":{"~":1,"~":2}}`)).toBe("/a~1b/~0")
    for (const text of [`{"a":"x\\\\","a":1}`, `{"a":"\\":\\"","b":1}`, `{"__proto__":1,"__proto__":2}`, `{"k:":":","k:":1}`]) {
      expect(duplicateMemberOf(text, JSON.parse(text))).toBe(findDuplicateMember(text))
    }
  })
})

/** The walkers as first written (iterative, allocating): the references the faster ones are held to. */
const referenceUnstorableReason = (s: string): string | undefined =>
  s.includes("\u0000") ? "must not contain NUL characters"
  : /\p{Surrogate}/u.test(s) ? "must not contain unpaired UTF-16 surrogates"
  : undefined

const referenceFindUnstorable = (value: unknown): { readonly pointer: string; readonly reason: string } | undefined => {
  const escape = (segment: string) => segment.replace(/~/g, "~0").replace(/\//g, "~1")
  const stack: Array<[unknown, string]> = [[value, ""]]
  while (stack.length > 0) {
    const [current, pointer] = stack.pop()!
    if (typeof current === "string") {
      const reason = referenceUnstorableReason(current)
      if (reason !== undefined) return { pointer, reason }
    } else if (typeof current === "object" && current !== null) {
      const entries = Array.isArray(current) ? current.map((item, i) => [String(i), item] as const) : Object.entries(current)
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i]!
        const at = `${pointer}/${escape(key)}`
        const reason = referenceUnstorableReason(key)
        if (reason !== undefined) return { pointer: at, reason: `member names ${reason.slice(5)}` }
        stack.push([child, at])
      }
    }
  }
  return undefined
}

const referenceExceedsDepth = (value: unknown, limit: number): boolean => {
  const stack: Array<[unknown, number]> = [[value, 1]]
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!
    if (typeof current !== "object" || current === null) continue
    if (depth > limit) return true
    for (const child of Array.isArray(current) ? current : Object.values(current)) stack.push([child, depth + 1])
  }
  return false
}

describe("the body walkers (storability, depth, members) agree with their references", () => {
  // Strings that may hold NUL, lone surrogates, pairs, '~' and '/'.
  const text = fc.string({ unit: fc.constantFrom("a", "~", "/", "\u0000", "\ud800", "\udc00", "\ud83d\ude00", "é"), maxLength: 4 })
  const { value } = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      text, fc.integer(), fc.boolean(), fc.constant(null),
      fc.array(tie("value"), { maxLength: 4 }),
      fc.dictionary(text, tie("value"), { maxKeys: 4 })
    )
  }))

  it("findUnstorable names the same first unstorable string or name, and the same reason", () => {
    fc.assert(fc.property(value, (v) => {
      expect(findUnstorable(v)).toEqual(referenceFindUnstorable(v))
    }), { seed: 2024, numRuns: 1000 })
  })

  it("unstorableReason sees a lone surrogate exactly where the Unicode property escape does", () => {
    fc.assert(fc.property(fc.string({ unit: "binary", maxLength: 12 }), text, (s, t) => {
      expect(unstorableReason(s)).toBe(referenceUnstorableReason(s))
      expect(unstorableReason(t)).toBe(referenceUnstorableReason(t))
    }), { seed: 2025, numRuns: 1000 })
  })

  it("exceedsDepth answers as the iterative walk for every limit", () => {
    fc.assert(fc.property(value, fc.integer({ min: 1, max: 6 }), (v, limit) => {
      expect(exceedsDepth(v, limit)).toBe(referenceExceedsDepth(v, limit))
    }), { seed: 2026, numRuns: 1000 })
  })

  it("opensAtMost is a bound: a text it admits never parses to a value deeper than the limit, and it counts exactly", () => {
    fc.assert(fc.property(value, fc.integer({ min: 0, max: 8 }), (v, limit) => {
      const text = JSON.stringify(v)
      const opened = [...text].filter((c) => c === "{" || c === "[").length
      expect(opensAtMost(text, limit)).toBe(opened <= limit)
      if (opensAtMost(text, limit)) expect(exceedsDepth(v, limit)).toBe(false)
    }), { seed: 2027, numRuns: 1000 })
  })

  it("a body nested far deeper than any limit is counted without exhausting the stack", () => {
    const deep = "[".repeat(20_000) + "{\"a\":1,\"a\":2}" + "]".repeat(20_000)
    expect(duplicateMemberOf(deep, JSON.parse(deep))).toBe(findDuplicateMember(deep))
    expect(exceedsDepth(JSON.parse(deep), 32)).toBe(true)
  })
})
