import { Duration, Effect } from "effect"
import { RateLimiter } from "effect/persistence"

/** [count after the take, ms until the window ends]: the shape every counter store answers with. */
export type Taken = readonly [count: number, ttlMs: number]

export type Store = RateLimiter.RateLimiterStore["Service"]

/** A store failure, as the library's stores report it. */
export const storeFailure = (message: string, cause?: unknown): RateLimiter.RateLimiterError =>
  new RateLimiter.RateLimiterError({
    reason: new RateLimiter.RateLimitStoreError(cause === undefined ? { message } : { message, cause })
  })

/**
 * The store methods this service never calls (it counts fixed windows only): they refuse, so a caller
 * that starts using them finds out at once rather than getting an algorithm that was never tested here.
 */
export const unusedMethods: Pick<Store, "tokenBucket" | "adaptiveConsume" | "adaptiveFeedback"> = {
  tokenBucket: () => Effect.fail(storeFailure("token-bucket is not used by this service")),
  adaptiveConsume: () => Effect.fail(storeFailure("adaptive rate limiting is not used by this service")),
  adaptiveFeedback: () => Effect.fail(storeFailure("adaptive rate limiting is not used by this service"))
}

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
export const memoryStore = (counters: WindowCounters): Store =>
  RateLimiter.RateLimiterStore.of({
    fixedWindow: (options) =>
      Effect.clockWith((clock) =>
        Effect.sync(() =>
          counters.take(options.key, options.tokens, Duration.toMillis(options.refillRate), options.limit, clock.currentTimeMillisUnsafe()))),
    ...unusedMethods
  })
