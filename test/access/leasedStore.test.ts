import { describe, expect, it } from "@effect/vitest"
import { Effect, type Scope } from "effect"
import { RateLimiter } from "effect/persistence"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { LeaseLifetimeMs, leasedStore, leaseSize } from "../../src/access/LeasedStore.js"

/**
 * Runs `effect` with errors made without stack frames. Each request refused past the limit fails with a new
 * RateLimitExceeded, and capturing its stack was most of this file's CPU (the properties refuse some 200,000
 * requests: 5 s of 8 on a 2-core machine, 2.5 s without); nothing reads those stacks. Nested and concurrent
 * runs (several instances at once) share one setting, restored when the last ends; the assertions run outside
 * and keep their stacks.
 */
let stacklessRuns = 0
let savedStackTraceLimit = Error.stackTraceLimit
const withoutStackTraces = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      if (stacklessRuns++ === 0) {
        savedStackTraceLimit = Error.stackTraceLimit
        Error.stackTraceLimit = 0
      }
    }),
    () => effect,
    () => Effect.sync(() => {
      if (--stacklessRuns === 0) Error.stackTraceLimit = savedStackTraceLimit
    })
  )

/** `n` requests through a limiter built on `store`; how many were let through. */
const admitted = (limiter: RateLimiter.RateLimiter, key: string, limit: number, n: number) =>
  Effect.forEach(
    Array.from({ length: n }),
    () => limiter.consume({ key, limit, window: "1 minute", onExceeded: "fail" }).pipe(Effect.as(1), Effect.orElseSucceed(() => 0)),
    { concurrency: 8 }
  ).pipe(Effect.map((results) => results.reduce((a, b) => a + b, 0)), withoutStackTraces)

/** A shared store (the library's memory store standing in for Redis or PostgreSQL) and `instances` leasing views of it. */
const instances = (count: number) =>
  Effect.gen(function*() {
    const shared = yield* RateLimiter.RateLimiterStore
    return yield* Effect.forEach(Array.from({ length: count }), () =>
      RateLimiter.make.pipe(Effect.provideService(RateLimiter.RateLimiterStore, leasedStore(shared))))
  }).pipe(Effect.provide(RateLimiter.layerStoreMemory))

/** One property run as `it.effect` runs a test: scoped, on its own TestClock (time starts at 0). */
const runOnTestClock = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>): Promise<A> =>
  Effect.runPromise(effect.pipe(Effect.scoped, Effect.provide(TestClock.layer())))

describe("leased rate-limit store", () => {
  it("a lease is at most 1/32 of the limit, and lasts a second at the limit's rate unless that would pass 1/32", () =>
    fc.assert(fc.property(fc.integer({ min: 1, max: 2_000_000_000 }), fc.constantFrom(1_000, 60_000, 86_400_000), (limit, windowMs) => {
      const refillMs = windowMs / limit
      const size = leaseSize(limit, refillMs)
      expect(Number.isSafeInteger(size) && size >= 1).toBe(true)
      if (limit < 64) expect(size).toBe(1)
      else {
        expect(size).toBeLessThanOrEqual(limit / 32)
        expect(size * refillMs).toBeGreaterThanOrEqual(Math.min(LeaseLifetimeMs, Math.floor(limit / 32) * refillMs) - 1e-6)
      }
    }), { numRuns: 500 }))

  it("under a high limit, requests spread over a second take the shared store a few times, not each time", () =>
    runOnTestClock(Effect.gen(function*() {
      const shared = yield* RateLimiter.RateLimiterStore
      let roundTrips = 0
      const counted = RateLimiter.RateLimiterStore.of({
        ...shared,
        fixedWindow: (options) => Effect.andThen(Effect.sync(() => roundTrips++), shared.fixedWindow(options))
      })
      const limiter = yield* RateLimiter.make.pipe(Effect.provideService(RateLimiter.RateLimiterStore, leasedStore(counted)))
      // 100,000,000 a minute (a monitor's key, or PV_LOG_RATE_LIMIT_PER_MINUTE raised), 10,000 requests in a second.
      for (let i = 0; i < 10_000; i++) {
        yield* limiter.consume({ key: "k", limit: 100_000_000, window: "1 minute", onExceeded: "fail" })
        yield* TestClock.adjust("100 micros")
      }
      expect(roundTrips).toBeLessThanOrEqual(3)
    }).pipe(Effect.provide(RateLimiter.layerStoreMemory))))

  it("one instance lets exactly the limit through a window, whatever the lease size", () =>
    fc.assert(fc.asyncProperty(fc.integer({ min: 1, max: 3000 }), fc.integer({ min: 1, max: 6000 }), (limit, requests) =>
      runOnTestClock(Effect.gen(function*() {
        const [limiter] = yield* instances(1)
        expect(yield* admitted(limiter!, "k", limit, requests)).toBe(Math.min(limit, requests))
      }))), { numRuns: 40 }))

  it("several instances never let more than the limit through, and strand at most a lease each", () =>
    fc.assert(fc.asyncProperty(fc.integer({ min: 1, max: 3000 }), fc.integer({ min: 2, max: 4 }), (limit, count) =>
      runOnTestClock(Effect.gen(function*() {
        const limiters = yield* instances(count)
        const perInstance = limit // together: count × the limit is asked for
        const totals = yield* Effect.forEach(limiters, (limiter) => admitted(limiter, "k", limit, perInstance), { concurrency: "unbounded" })
        const total = totals.reduce((a, b) => a + b, 0)
        expect(total).toBeLessThanOrEqual(limit)
        const lease = leaseSize(limit, 60_000 / limit)
        expect(total).toBeGreaterThanOrEqual(limit - count * (lease - 1))
        if (lease === 1) expect(total).toBe(limit)
      }))), { numRuns: 40 }))

  it.effect("unspent leased tokens do not carry into the next window", () =>
    Effect.gen(function*() {
      const limit = 6400 // lease of 200
      const [limiter] = yield* instances(1)
      expect(yield* admitted(limiter!, "k", limit, 10)).toBe(10)
      yield* TestClock.adjust("2 minutes")
      expect(yield* admitted(limiter!, "k", limit, limit + 50)).toBe(limit)
    }))
})
