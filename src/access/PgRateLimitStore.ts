import { RateLimiter } from "@effect/experimental"
import { PgClient } from "@effect/sql-pg"
import { Clock, Duration, Effect, Layer, Schedule } from "effect"

/**
 * `RateLimiterStore` on PostgreSQL, for several instances sharing a database without Redis. Same
 * semantics as the library's memory and Redis stores: each taken token extends the window by
 * `refillRate`; a refused take leaves the expiry alone, so the window still rolls over on time.
 * One atomic upsert per call, on an UNLOGGED table (no durable write).
 */
export const makePgRateLimitStore = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient
  const storeError = (cause: unknown) => new RateLimiter.RateLimitStoreError({ message: "rate-limit store failed", cause })

  const fixedWindow: RateLimiter.RateLimiterStore["Type"]["fixedWindow"] = (options) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const refill = Duration.toMillis(options.refillRate)
      const limit = options.limit ?? Number.MAX_SAFE_INTEGER
      const step = Math.ceil(refill * options.tokens)
      const rows = yield* sql<{ count: string; expires_at_ms: string }>`
        INSERT INTO rate_limit_counters AS c (key, count, expires_at_ms)
        VALUES (${options.key}, ${options.tokens}, ${now + step})
        ON CONFLICT (key) DO UPDATE SET
          count = CASE WHEN c.expires_at_ms <= ${now} THEN ${options.tokens} ELSE c.count + ${options.tokens} END,
          expires_at_ms = CASE
            WHEN c.expires_at_ms <= ${now} THEN ${now + step}
            WHEN c.count + ${options.tokens} > ${limit} THEN c.expires_at_ms
            ELSE c.expires_at_ms + ${step} END
        RETURNING count::text, expires_at_ms::text`.pipe(Effect.mapError(storeError))
      const row = rows[0]!
      return [Number(row.count), Number(row.expires_at_ms) - now] as const
    })

  const tokenBucket: RateLimiter.RateLimiterStore["Type"]["tokenBucket"] = () =>
    Effect.fail(new RateLimiter.RateLimitStoreError({ message: "token-bucket is not used by this service" }))

  // Expired counters are garbage; sweep them now and then (safe on several instances at once).
  yield* Clock.currentTimeMillis.pipe(
    Effect.flatMap((now) => sql`DELETE FROM rate_limit_counters WHERE expires_at_ms < ${now - 60_000}`),
    Effect.ignore,
    Effect.repeat(Schedule.spaced(Duration.minutes(10))),
    Effect.forkScoped
  )

  return RateLimiter.RateLimiterStore.of({ fixedWindow, tokenBucket })
})

export const PgRateLimitStoreLive = Layer.scoped(RateLimiter.RateLimiterStore, makePgRateLimitStore)
