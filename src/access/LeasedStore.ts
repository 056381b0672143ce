import { Clock, Duration, Effect, Semaphore } from "effect"
import { RateLimiter } from "effect/persistence"
import type { Store } from "./Counters.js"

/** A store plus, where it has one, a synchronous way to take one token from local state. */
export interface CounterBackend {
  readonly store: Store
  /** One token from local state, or undefined when only the store can answer. */
  readonly trySpend: (key: string, limit: number, refillMs: number, now: number) => readonly [number, number] | undefined
}

/** How long a lease's tokens last at least, spent at the limit's own rate. */
export const LeaseLifetimeMs = 1_000

/**
 * Tokens taken from the shared store per round trip, for a limit of `limit` tokens refilled one each `refillMs`:
 * 1 below 64 per window (so small limits stay exact across instances), else 1/32 of the limit, at most 1,000,
 * but never less than a second's worth at the limit's rate (LeaseLifetimeMs). A lease's tokens die with the
 * store's window, and each token extends that window by `refillMs` only, so a lease of `n` lives `n × refillMs`:
 * with 1,000 tokens of a limit of 100,000,000 a minute that was 0.6 ms, and a request under that limit took a
 * round trip to the store nearly every time. Never more than 1/32 of the limit, so what an instance can strand
 * stays within the share above.
 */
export const leaseSize = (limit: number, refillMs: number): number =>
  limit < 64 ? 1 : Math.min(Math.floor(limit / 32), Math.max(1000, Math.ceil(LeaseLifetimeMs / refillMs)))

interface Lease {
  /** Tokens this instance took from the store and has not spent yet. */
  unspent: number
  /** The store's count after the lease was taken. */
  readonly count: number
  /** When the store's window for those tokens ends; unspent tokens die with it. */
  readonly expiresAt: number
}

/**
 * A shared store (PostgreSQL, Redis) behind a local lease, so most requests cost no round trip: an
 * instance takes a block of tokens at once and spends them locally. The store still caps the total, so
 * the limit is never exceeded; a single instance stays exact (every token it leased is spent by it); with
 * several instances, tokens leased but unspent by one may make another refuse up to one lease early.
 * Tokens never outlive the store window they were taken in.
 */
export const leasedStore = (inner: Store, size: (limit: number, refillMs: number) => number = leaseSize): Store => leased(inner, size).store

export const leased = (inner: Store, size: (limit: number, refillMs: number) => number = leaseSize): CounterBackend => {
  const leases = new Map<string, Lease>()
  const locks = new Map<string, Semaphore.Semaphore>()
  const lockFor = (key: string) => {
    let lock = locks.get(key)
    if (lock === undefined) {
      if (locks.size > 100_000) locks.clear()
      lock = Semaphore.makeUnsafe(1)
      locks.set(key, lock)
    }
    return lock
  }
  const spend = (key: string, now: number): readonly [number, number] | undefined => {
    const lease = leases.get(key)
    if (lease === undefined || lease.unspent <= 0 || now >= lease.expiresAt) return undefined
    lease.unspent--
    return [lease.count - lease.unspent, lease.expiresAt - now]
  }

  const fixedWindow: Store["fixedWindow"] = (options) => {
    const limit = options.limit
    const refillMs = Duration.toMillis(options.refillRate)
    if (limit === undefined || options.tokens !== 1 || size(limit, refillMs) <= 1) return inner.fixedWindow(options)
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const local = spend(options.key, now)
      if (local !== undefined) return Effect.succeed(local)
      // One lease request per key at a time; whoever waited may find the fresh lease already there.
      return lockFor(options.key).withPermits(1)(Effect.gen(function*() {
        const waited = spend(options.key, yield* Clock.currentTimeMillis)
        if (waited !== undefined) return waited
        let tokens = size(limit, refillMs)
        let [count, ttl] = yield* inner.fixedWindow({ ...options, tokens })
        if (count > limit) {
          // Not a whole lease left: take a single token if there is one.
          tokens = 1
          ;[count, ttl] = yield* inner.fixedWindow({ ...options, tokens })
          if (count > limit) return [count, ttl] as const
        }
        const at = yield* Clock.currentTimeMillis
        leases.delete(options.key)
        if (leases.size > 100_000) leases.clear()
        leases.set(options.key, { unspent: tokens - 1, count, expiresAt: at + ttl })
        return [count - (tokens - 1), ttl] as const
      }))
    })
  }

  return {
    // Only fixed windows are leased; the other algorithms go to the shared store as they are.
    store: RateLimiter.RateLimiterStore.of({
      fixedWindow,
      tokenBucket: inner.tokenBucket,
      adaptiveConsume: inner.adaptiveConsume,
      adaptiveFeedback: inner.adaptiveFeedback
    }),
    trySpend: (key, limit, refillMs, now) => (size(limit, refillMs) <= 1 ? undefined : spend(key, now))
  }
}
