import { RateLimiter } from "@effect/experimental"
import { Duration, Effect } from "effect"

/** [count after the take, ms until the window ends]: the shape every counter store answers with. */
export type Taken = readonly [count: number, ttlMs: number]

/**
 * Fixed-window counters in this process, with the semantics of the library's stores: each taken token
 * moves the window's end `refill` later; a take that would pass `limit` is refused (count + tokens is
 * returned) and leaves the window alone, so it still ends on time. Synchronous, so a request that only
 * needs local state never waits on anything.
 */
export class WindowCounters {
  private readonly windows = new Map<string, { count: number; expiresAt: number }>()

  take(key: string, tokens: number, refillMs: number, limit: number | undefined, now: number): Taken {
    let window = this.windows.get(key)
    if (window === undefined || window.expiresAt <= now) {
      if (window === undefined && this.windows.size >= 200_000) this.sweep(now)
      window = { count: 0, expiresAt: now }
      this.windows.set(key, window)
    }
    if (limit !== undefined && window.count + tokens > limit) return [window.count + tokens, window.expiresAt - now]
    window.count += tokens
    window.expiresAt += refillMs * tokens
    return [window.count, window.expiresAt - now]
  }

  private sweep(now: number) {
    for (const [key, window] of this.windows) if (window.expiresAt <= now) this.windows.delete(key)
  }
}

/** The counters as a `RateLimiterStore`, for the embedded (single-instance) deployment. */
export const memoryStore = (counters: WindowCounters): RateLimiter.RateLimiterStore["Type"] =>
  RateLimiter.RateLimiterStore.of({
    fixedWindow: (options) =>
      Effect.clockWith((clock) =>
        Effect.sync(() =>
          counters.take(options.key, options.tokens, Duration.toMillis(options.refillRate), options.limit, clock.unsafeCurrentTimeMillis()))),
    tokenBucket: () => Effect.fail(new RateLimiter.RateLimitStoreError({ message: "token-bucket is not used by this service" }))
  })
