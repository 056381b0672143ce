import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import { freshnessAt } from "../../src/domain/Freshness.js"
import { trustCacheHint } from "../../src/mcp/Mcp.js"

/** The 2026-07-28 cache hint of a trust-document result: never longer than the document's freshness state holds. */

const hintOf = (asOf: number, validUntil: number, now: number) => {
  const text = trustCacheHint({ freshness: { as_of: new Date(asOf).toISOString(), valid_until: new Date(validUntil).toISOString() } }, now)
  return JSON.parse(`{${text.slice(1)}}`) as { ttlMs: number; cacheScope: string }
}

const instant = fc.integer({ min: Date.UTC(2020, 0, 1), max: Date.UTC(2035, 0, 1) })

describe("MCP 2026-07-28 cache hints", () => {
  it("keeps a trust document fresh only while its freshness state stays what the document says", () => fc.assert(fc.property(
    instant,
    fc.integer({ min: 1, max: 400 * 86_400_000 }),
    fc.integer({ min: -10 * 86_400_000, max: 900 * 86_400_000 }),
    (asOf, window, offset) => {
      const validUntil = asOf + window
      const now = asOf + offset
      const { ttlMs, cacheScope } = hintOf(asOf, validUntil, now)
      expect(cacheScope).toBe("private")
      expect(Number.isInteger(ttlMs) && ttlMs >= 0).toBe(true)
      const state = freshnessAt(now, asOf, validUntil, "ACTIVE")
      if (ttlMs > 0) {
        expect(freshnessAt(now + ttlMs - 1, asOf, validUntil, "ACTIVE")).toBe(state)
        expect(freshnessAt(now + ttlMs, asOf, validUntil, "ACTIVE")).not.toBe(state)
      } else {
        expect(state).toBe("EXPIRED")
      }
    }
  )))

  it("adds nothing to a result without a trust document's freshness", () => {
    for (const value of [null, 1, "x", [], {}, { freshness: {} }, { freshness: { as_of: 1, valid_until: 2 } }, { changed: false }]) {
      expect(trustCacheHint(value, Date.now())).toBe("")
    }
  })
})
