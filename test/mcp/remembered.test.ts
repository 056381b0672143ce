import { describe, expect, it } from "@effect/vitest"
import { Option, Result, Schema } from "effect"
import * as fc from "fast-check"
import { memoByText } from "../../src/domain/Memo.js"
import { PublicId } from "../../src/domain/PublicId.js"
import { rememberedTransportProblem, transportProblem } from "../../src/mcp/Mcp.js"
import { rememberedDecode, stringArgumentsKey } from "../../src/mcp/ToolDefinition.js"

// Remembered answers of pure rules (per-request checks kept per distinct input) must be the rules' own
// answers, whatever the inputs and their order, also past the memory's capacity.

const tag = (found: Option.Option<{ readonly _tag: string }>) => Option.getOrNull(Option.map(found, (problem) => problem._tag))

const headerValue = fc.oneof(
  fc.constantFrom(
    undefined, "", "application/json", "Application/JSON; charset=utf-8", "application/problem+json", "text/plain", "application/jsonx",
    "application/json, text/event-stream", "text/event-stream", "application/json;q=0", "*/*", "application/*;q=0, */*", "application/json;q=0.5"
  ),
  fc.string({ maxLength: 40 })
)

describe("remembered rules answer as the rules do", () => {
  it("memoByText: the function's answer for every input, in any order, past its capacity", () =>
    fc.assert(fc.property(fc.array(fc.string({ maxLength: 6 }), { maxLength: 300 }), fc.integer({ min: 1, max: 8 }), (inputs, capacity) => {
      let calls = 0
      const f = (text: string) => (calls++, text.length % 3 === 0 ? undefined : `${text}:${text.length}`)
      const remembered = memoByText(f, capacity)
      for (const input of inputs) expect(remembered(input)).toBe(text(input))
      expect(calls).toBeLessThanOrEqual(inputs.length)
      function text(input: string) {
        return input.length % 3 === 0 ? undefined : `${input}:${input.length}`
      }
    })))

  it("a remembered function is not called again for an input it holds", () => {
    let calls = 0
    const remembered = memoByText((text: string) => (calls++, text.toUpperCase()), 2)
    for (const text of ["a", "a", "b", "a"]) remembered(text)
    expect(calls).toBe(2)
    // "a" was the oldest when "c" came: forgotten, computed again.
    for (const text of ["c", "a"]) remembered(text)
    expect(calls).toBe(4)
  })

  it("the MCP transport refusals, remembered, are transportProblem's for any header sequence", () =>
    fc.assert(fc.property(fc.array(fc.record({ "content-type": headerValue, accept: headerValue }), { maxLength: 60 }), (requests) => {
      const remembered = rememberedTransportProblem()
      for (const headers of [...requests, ...requests]) expect(tag(remembered(headers))).toBe(tag(transportProblem(headers)))
    })))

  const PublicIdArgument = Schema.Struct({ public_id: PublicId })
  const decodeStrict = Schema.decodeUnknownResult(PublicIdArgument)
  const decode = (args: unknown) => Result.mapError(decodeStrict(args, { errors: "all", onExcessProperty: "error" }), (error) => error.message)
  const validId = fc.constantFrom("DET-V1-ACME-ROBOTICS-0001", "QUAL-V1-BENCH-0002", "DET-V1-PROF-0001")
  const argument = fc.oneof(
    fc.record({ public_id: fc.oneof(validId, fc.string({ maxLength: 12 })) }),
    fc.record({ public_id: validId, other: fc.string({ maxLength: 4 }) }),
    fc.dictionary(fc.string({ maxLength: 4 }), fc.oneof(validId, fc.string({ maxLength: 4 })), { maxKeys: 6 }),
    fc.jsonValue({ maxDepth: 2 }),
    fc.constant(JSON.parse(`{"__proto__":"DET-V1-ACME-ROBOTICS-0001"}`)),
    fc.constant(Object.assign(Object.create(null), { public_id: "DET-V1-ACME-ROBOTICS-0001" }))
  )

  it("a tool's remembered argument check answers as the schema does, for any arguments in any order", () =>
    fc.assert(fc.property(fc.array(argument, { maxLength: 40 }), (calls) => {
      const remembered = rememberedDecode((args) => Result.mapError(decode(args), () => undefined as never))
      for (const args of [...calls, ...calls]) {
        const expected = decode(args)
        const got = remembered(args)
        expect(Result.isSuccess(got)).toBe(Result.isSuccess(expected))
        if (Result.isSuccess(got) && Result.isSuccess(expected)) expect(got.success).toEqual(expected.success)
      }
    })))

  it("only a few plain string members make a key", () => {
    expect(stringArgumentsKey({ public_id: "DET-V1-X" })).toBe(`{"public_id":"DET-V1-X"}`)
    expect(stringArgumentsKey({ a: "1", b: "2", c: "3", d: "4", e: "5" })).toBeUndefined()
    expect(stringArgumentsKey({ public_id: 1 })).toBeUndefined()
    expect(stringArgumentsKey(["DET-V1-X"])).toBeUndefined()
    expect(stringArgumentsKey(Object.assign(Object.create(null), { public_id: "DET-V1-X" }))).toBeUndefined()
    expect(stringArgumentsKey(null)).toBeUndefined()
  })
})
