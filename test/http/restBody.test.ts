import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import { rememberSuccesses } from "../../src/domain/Memo.js"
import { checkRestText, restTextChecks } from "../../src/http/RequestGuard.js"

// A REST body's checks are remembered per caller and text (a key sending a body again, as a receipt replay
// does, is not parsed again): the remembered answer must be the checks' own, for any bodies in any order,
// also past the memory's capacity, and a remembered value is handed only to the caller that sent the text.

const outcome = (result: Result.Result<unknown, { readonly _tag: string }>) =>
  Result.isSuccess(result) ? { ok: result.success } : { failed: result.failure._tag, problem: JSON.parse(JSON.stringify(result.failure)) }

/** Texts that pass, and texts each check refuses: not JSON, repeated names, too deep, NUL, lone surrogates, too long to remember. */
const bodyText = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
  fc.constantFrom(
    `{"tenant_id":"t","organization":"Acme","organization":"Evil"}`,
    `{"a":{"b":1,"b":2}}`,
    `{"principal":"nul\\u0000here"}`,
    `{"principal":"\\ud800"}`,
    "[".repeat(80) + "]".repeat(80),
    "{not json",
    "",
    `{"big":"${"x".repeat(3000)}"}`
  ),
  fc.string({ maxLength: 30 })
)

describe("remembered REST body checks", () => {
  it("rememberSuccesses: f's answer for every input in any order, past its capacity; failures are worked out again", () =>
    fc.assert(fc.property(fc.array(fc.integer({ min: -20, max: 20 }), { maxLength: 200 }), fc.integer({ min: 1, max: 6 }), (inputs, capacity) => {
      const calls = new Map<number, number>()
      const f = (n: number) => {
        calls.set(n, (calls.get(n) ?? 0) + 1)
        return n % 3 === 0 ? Result.fail(`no ${n}`) : Result.succeed({ n })
      }
      const remembered = rememberSuccesses((n: number) => (n > 15 ? undefined : String(n)), f, capacity)
      // The model: successes kept by key, the oldest stored forgotten first beyond `capacity` (a hit does not refresh).
      const model = new Map<number, unknown>()
      const expectedCalls = new Map<number, number>()
      for (const n of inputs) {
        const got = remembered(n)
        expect(Result.isSuccess(got)).toBe(n % 3 !== 0)
        if (Result.isFailure(got)) expect(got.failure).toBe(`no ${n}`)
        else expect(got.success).toEqual({ n })
        if (n <= 15 && model.has(n)) {
          // Remembered: the very value given the first time, and f not called again.
          if (Result.isSuccess(got)) expect(got.success).toBe(model.get(n))
          continue
        }
        expectedCalls.set(n, (expectedCalls.get(n) ?? 0) + 1)
        if (n <= 15 && Result.isSuccess(got)) {
          if (model.size >= capacity) model.delete(model.keys().next().value!)
          model.set(n, got.success)
        }
        expect(model.size).toBeLessThanOrEqual(capacity)
      }
      // Failures and keyless inputs are worked out every time; successes once per stay in the memory.
      expect(calls).toEqual(expectedCalls)
    })))

  it("the remembered checks answer as checkRestText does, for any callers and bodies, in any order", () =>
    fc.assert(fc.property(fc.array(fc.record({ caller: fc.constantFrom("", "k1", "k2"), text: bodyText }), { maxLength: 40 }), (bodies) => {
      const checks = restTextChecks()
      for (const body of [...bodies, ...bodies]) expect(outcome(checks(body))).toEqual(outcome(checkRestText(body.text)))
    })))

  it("a body sent again by the same caller gets the value checked the first time; another caller gets its own", () => {
    const checks = restTextChecks()
    const text = `{"tenant_id":"t","claim_scope":["identity"]}`
    const first = checks({ caller: "k1", text })
    const again = checks({ caller: "k1", text })
    const other = checks({ caller: "k2", text })
    expect(Result.isSuccess(first) && Result.isSuccess(again) && Result.isSuccess(other)).toBe(true)
    if (!Result.isSuccess(first) || !Result.isSuccess(again) || !Result.isSuccess(other)) return
    expect(again.success).toBe(first.success)
    expect(other.success).not.toBe(first.success)
    expect(other.success).toEqual(first.success)
    // Too long to remember: parsed afresh each time.
    const long = `{"big":"${"x".repeat(3000)}"}`
    const a = checks({ caller: "k1", text: long })
    const b = checks({ caller: "k1", text: long })
    expect(Result.isSuccess(a) && Result.isSuccess(b) && a.success !== b.success).toBe(true)
  })
})
