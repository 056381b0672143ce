import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attemptResultOf, MaxAttemptErrorChars, storableError } from "../../src/webhooks/Attempts.js"
import type { AttemptOutcome } from "../../src/webhooks/Send.js"

const text = fc.string({ unit: "binary", maxLength: 2_000 })
const scope = fc.constantFrom("origin" as const, "url" as const)
const failed: fc.Arbitrary<AttemptOutcome> = fc.record(
  {
    kind: fc.constant("failed" as const),
    status: fc.integer({ min: 100, max: 599 }),
    error: text,
    scope,
    timedOut: fc.constant(true as const)
  },
  { requiredKeys: ["kind", "error", "scope"] }
)
const delivered: fc.Arbitrary<AttemptOutcome> = fc.record({ kind: fc.constant("delivered" as const), status: fc.integer({ min: 200, max: 299 }) })

/** Text PostgreSQL stores: no NUL, and valid UTF-16 (so valid UTF-8 once encoded). */
const storable = (s: string) => !s.includes("\u0000") && Buffer.from(s, "utf8").toString("utf8") === s

describe("storableError", () => {
  it("is always storable and at most the cap, and leaves storable short text as it is", () => {
    fc.assert(fc.property(text, (s) => {
      const out = storableError(s)
      expect(storable(out)).toBe(true)
      expect(out.length).toBeLessThanOrEqual(MaxAttemptErrorChars)
      if (storable(s) && s.length <= MaxAttemptErrorChars) expect(out).toBe(s)
      // A long text keeps its beginning.
      if (s.length > MaxAttemptErrorChars && storable(s.slice(0, 100))) expect(out.startsWith(s.slice(0, 100))).toBe(true)
    }), { numRuns: 3000 })
    expect(storableError("a\u0000b\ud800c")).toBe("a\uFFFDb\uFFFDc")
    expect(storableError("😀")).toBe("😀")
  })
})

describe("attemptResultOf", () => {
  it("delivered is a 2xx with its status and no error", () => {
    fc.assert(fc.property(delivered, (outcome) => {
      expect(attemptResultOf(outcome)).toEqual({ outcome: "delivered", status: (outcome as { status: number }).status, error: null })
    }))
  })

  it("a failure keeps its status and a storable error, and its outcome follows one rule", () => {
    fc.assert(fc.property(failed, (outcome) => {
      if (outcome.kind !== "failed") return
      const result = attemptResultOf(outcome)
      expect(result.status).toBe(outcome.status ?? null)
      expect(result.error).toBe(storableError(outcome.error))
      const expected = outcome.status !== undefined
        ? outcome.status >= 300 && outcome.status < 400 ? "refused" : "failed"
        : outcome.timedOut === true ? "timeout" : outcome.scope === "url" ? "refused" : "failed"
      expect(result.outcome).toBe(expected)
      expect(result.outcome).not.toBe("delivered")
    }), { numRuns: 3000 })
  })

  it("names what Send reports", () => {
    expect(attemptResultOf({ kind: "failed", error: "timed out after 10 s", scope: "origin", timedOut: true }))
      .toEqual({ outcome: "timeout", status: null, error: "timed out after 10 s" })
    expect(attemptResultOf({ kind: "failed", status: 302, error: "redirect 302 not followed", scope: "url" }).outcome).toBe("refused")
    expect(attemptResultOf({ kind: "failed", error: "refused address 10.0.0.5", scope: "url" }).outcome).toBe("refused")
    expect(attemptResultOf({ kind: "failed", error: "ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9", scope: "origin" }).outcome).toBe("failed")
    expect(attemptResultOf({ kind: "failed", status: 503, error: "HTTP 503", scope: "origin" })).toEqual({ outcome: "failed", status: 503, error: "HTTP 503" })
    expect(attemptResultOf({ kind: "failed", status: 404, error: "HTTP 404", scope: "url" }).outcome).toBe("failed")
  })
})
