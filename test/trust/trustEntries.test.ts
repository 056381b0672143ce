import { describe, expect, it } from "vitest"
import { type CachedTrust, TrustCacheMaxAgeMs, trustEntries } from "../../src/trust/TrustCache.js"
import type { MachineTrustResponse } from "../../src/domain/MachineTrust.js"

const entry = (builtAtMs: number, validUntilMs = Number.POSITIVE_INFINITY): CachedTrust =>
  ({ document: {} as MachineTrustResponse, builtAtMs, validUntilMs })

describe("the trust cache's entries (trust/TrustCache.ts)", () => {
  it("keeps only what can still be served: documents built more than TrustCacheMaxAgeMs ago are dropped", () => {
    const cache = trustEntries(10_000)
    for (let i = 0; i < 1_000; i++) cache.put(`DET-${i}`, 0, entry(1_000 + i))
    expect(cache.size()).toBe(1_000)
    // A crawl later: everything built before (now - max age) is swept as new documents are built.
    const later = 1_000 + 999 + TrustCacheMaxAgeMs
    cache.put("DET-new", 0, entry(later))
    expect(cache.size()).toBe(1)
    expect(cache.get("DET-new", later)?.builtAtMs).toBe(later)
    expect(cache.get("DET-999", later)).toBeUndefined()
  })

  it("sweeps in build order: a rebuilt document moves to the end and is not dropped with the old ones", () => {
    const cache = trustEntries(10_000)
    cache.put("A", 0, entry(0))
    cache.put("B", 0, entry(10))
    cache.put("A", 0, entry(TrustCacheMaxAgeMs - 1)) // rebuilt
    cache.put("C", 0, entry(TrustCacheMaxAgeMs + 20)) // B is too old by now, A is not
    expect(cache.get("A", TrustCacheMaxAgeMs + 20)?.builtAtMs).toBe(TrustCacheMaxAgeMs - 1)
    expect(cache.size()).toBe(2)
  })

  it("serves an entry only within [builtAt, min(valid until, builtAt + max age)), and never after a clock move back", () => {
    const cache = trustEntries(10)
    cache.put("A", 0, entry(100, 200))
    expect(cache.get("A", 99)).toBeUndefined()
    expect(cache.get("A", 100)).toBeDefined()
    expect(cache.get("A", 200)).toBeUndefined()
    // Built "in the future" (the clock then moved back): dropped by the next build.
    cache.put("B", 0, entry(1_000_000))
    cache.put("C", 0, entry(150))
    expect(cache.get("B", 150)).toBeUndefined()
    expect(cache.size()).toBe(1)
  })

  it("stays within its capacity, and a write's eviction (generation) stops a stale put", () => {
    const cache = trustEntries(3)
    for (let i = 0; i < 10; i++) cache.put(`K${i}`, 0, entry(i))
    expect(cache.size()).toBe(3)
    const seen = cache.generation("X")
    cache.evict("X")
    cache.put("X", seen, entry(11))
    expect(cache.get("X", 11)).toBeUndefined()
  })

  it("a resync (clear) stops the put of every build that began before it, cached key or not", () => {
    const cache = trustEntries()
    cache.put("A", cache.generation("A"), entry(1))
    const seenA = cache.generation("A")
    const seenB = cache.generation("B")
    cache.clear()
    cache.put("A", seenA, entry(2))
    cache.put("B", seenB, entry(2))
    expect(cache.size()).toBe(0)
    cache.put("B", cache.generation("B"), entry(3))
    expect(cache.get("B", 3)).toBeDefined()
  })
})
