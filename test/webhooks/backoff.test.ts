import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { MaxRetryDelayMs, MinRetryDelayMs, retryDelayMs } from "../../src/webhooks/Backoff.js"

const random = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })
const failures = fc.integer({ min: 1, max: 10_000 })

describe("retryDelayMs", () => {
  it("is always within [750 ms, 5 min]", () => {
    fc.assert(fc.property(failures, random, (n, r) => {
      const delay = retryDelayMs(n, r)
      expect(delay).toBeGreaterThanOrEqual(MinRetryDelayMs)
      expect(delay).toBeLessThanOrEqual(MaxRetryDelayMs)
      expect(Number.isInteger(delay)).toBe(true)
    }), { numRuns: 5000 })
    expect([MinRetryDelayMs, MaxRetryDelayMs]).toEqual([750, 300_000])
  })

  it("starts at about 1 s and doubles, ±25 %, until the cap", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 40 }), random, (n, r) => {
      const base = Math.min(300_000, 1000 * 2 ** (n - 1))
      const expected = Math.min(300_000, base * (0.75 + 0.5 * r))
      expect(Math.abs(retryDelayMs(n, r) - expected)).toBeLessThanOrEqual(0.5)
      // Below the cap the next delay is twice this one (for the same draw).
      if (2 * expected <= 300_000) expect(Math.abs(retryDelayMs(n + 1, r) - 2 * retryDelayMs(n, r))).toBeLessThanOrEqual(1)
    }), { numRuns: 2000 })
    expect(retryDelayMs(1, 0.5)).toBe(1000)
    expect(retryDelayMs(1, 0)).toBe(750)
    expect(retryDelayMs(2, 0.5)).toBe(2000)
    expect(retryDelayMs(9, 0.5)).toBe(256_000)
  })

  it("is monotone in failures for the same random draw, including at the cap", () => {
    fc.assert(fc.property(failures, failures, random, (a, b, r) => {
      const [low, high] = a <= b ? [a, b] : [b, a]
      expect(retryDelayMs(low, r)).toBeLessThanOrEqual(retryDelayMs(high, r))
    }), { numRuns: 2000 })
    expect(retryDelayMs(20, 0.99)).toBe(MaxRetryDelayMs)
    expect(retryDelayMs(1e9, 0)).toBe(225_000)
  })

  it("treats nonsense input (NaN, below 1, infinite) as the nearest sensible count instead of failing", () => {
    for (const n of [0, -3, Number.NaN]) expect(retryDelayMs(n, 0.5)).toBe(1000)
    expect(retryDelayMs(Number.POSITIVE_INFINITY, 0.5)).toBe(300_000)
    expect(retryDelayMs(3, Number.NaN)).toBe(4000)
  })
})
