import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"

import { ApiKeys, UsageFlushInterval } from "../../src/access/ApiKeys.js"
import { rateLimitHeaders, secondsUntilUtcMidnight, utcDay } from "../../src/access/RateLimits.js"
import { KeyStore } from "../../src/access/Repo.js"
import type { ApiKeyRecord } from "../../src/domain/ApiKeyRecord.js"
import { exceedsDepth } from "../../src/domain/Json.js"
import { Ids } from "../../src/platform/Ids.js"

const DAY = 86_400_000

describe("UTC day boundaries", () => {
  it("a daily quota returns exactly at the next UTC midnight", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 4_102_444_800_000 }), (now) => {
      const wait = secondsUntilUtcMidnight(now)
      expect(wait).toBeGreaterThanOrEqual(1)
      expect(wait).toBeLessThanOrEqual(86_400)
      // One millisecond before the reset is still today; the reset instant is tomorrow.
      const reset = Math.floor(now / DAY) * DAY + DAY
      expect(utcDay(reset - 1)).toBe(utcDay(now))
      expect(utcDay(reset)).not.toBe(utcDay(now))
      expect(wait).toBe(Math.max(1, Math.ceil((reset - now) / 1000)))
    }))
  })
})

describe("RateLimit fields", () => {
  it("state the key's own policy and never a negative remainder", () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 1_000_000 }), fc.integer({ min: 1, max: 1_000_000_000 }), fc.integer({ min: -5, max: 1_000_000 }), fc.integer({ min: 0, max: 60 }),
      (perMinute, perDay, remaining, reset) => {
        const headers = rateLimitHeaders({ rate_limit_per_minute: perMinute, daily_quota: perDay } as ApiKeyRecord, remaining, reset)
        expect(headers["ratelimit-policy"]).toBe(`"minute";q=${perMinute};w=60, "day";q=${perDay};w=86400`)
        expect(headers.ratelimit).toBe(`"minute";r=${Math.max(0, remaining)};t=${reset}`)
      }
    ))
  })
})

describe("JSON depth guard", () => {
  const nest = (depth: number): unknown => (depth <= 1 ? { leaf: 1 } : { child: nest(depth - 1) })
  it("flags exactly the documents nested deeper than the limit", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 80 }), fc.integer({ min: 1, max: 64 }), (depth, limit) => {
      expect(exceedsDepth(nest(depth), limit)).toBe(depth > limit)
      expect(exceedsDepth([nest(depth)], limit)).toBe(depth + 1 > limit)
    }))
  })
  it("treats scalars as depth 0", () => {
    expect(exceedsDepth("x", 1)).toBe(false)
    expect(exceedsDepth(null, 1)).toBe(false)
  })
})

/** An in-memory KeyStore: the service under test is real, only its storage is swapped. */
const memoryKeyStore = () => {
  const rows = new Map<string, ApiKeyRecord>()
  const touched: Array<{ ids: ReadonlyArray<string>; at: Date }> = []
  const layer = Layer.succeed(KeyStore, KeyStore.of({
    findByHash: (hash) => Effect.succeed(Option.fromNullishOr([...rows.values()].find((r) => r.key_hash === hash))),
    insert: (record) => Effect.sync(() => void rows.set(record.key_id, record)),
    list: () => Effect.succeed([...rows.values()]),
    revoke: (keyId, at) => Effect.sync(() => {
      const row = rows.get(keyId)
      if (row === undefined) return Option.none()
      rows.set(keyId, { ...row, revoked_at: row.revoked_at ?? at.toISOString() })
      return Option.some(row.key_hash)
    }),
    touch: (ids, at) => Effect.sync(() => void touched.push({ ids, at }))
  }))
  return { layer, touched }
}

describe("key usage", () => {
  it.effect("records last_used_at in one batched write per interval, not one per request", () => {
    const store = memoryKeyStore()
    return Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create({ tenant_id: "t", name: "n", scopes: ["trust:read"] })
      for (let i = 0; i < 25; i++) {
        const key = yield* keys.authenticate(created.api_key)
        yield* keys.markUsed(key.key_id)
      }
      expect(store.touched).toHaveLength(0)
      yield* TestClock.adjust(UsageFlushInterval)
      yield* Effect.yieldNow
      expect(store.touched).toHaveLength(1)
      expect(store.touched[0]!.ids).toEqual([created.key_id])
      yield* TestClock.adjust(UsageFlushInterval)
      expect(store.touched).toHaveLength(1) // nothing used since: no write
    }).pipe(Effect.provide(ApiKeys.layerNoDeps.pipe(Layer.provide([store.layer, Ids.layer]))))
  })

  it.effect("refuses a key once its expiry passes on the clock", () => {
    const store = memoryKeyStore()
    return Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create({
        tenant_id: "t", name: "n", scopes: ["trust:read"], expires_at: new Date(10_000).toISOString()
      })
      expect((yield* keys.authenticate(created.api_key)).key_id).toBe(created.key_id)
      yield* TestClock.adjust("10 seconds")
      const refused = yield* Effect.flip(keys.authenticate(created.api_key))
      expect(refused._tag).toBe("Unauthorized")
    }).pipe(Effect.provide(ApiKeys.layerNoDeps.pipe(Layer.provide([store.layer, Ids.layer]))))
  })
})
