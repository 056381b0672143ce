import { PgClient } from "@effect/sql-pg"
import { Clock, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { RateLimiter } from "effect/persistence"
import { SqlSchema } from "effect/sql"
import { type Store, storeFailure, unusedMethods } from "./Counters.js"

/** bigint columns come back as text (`::text`), so no bigint reaches JSON or arithmetic. */
const CounterRow = Schema.Struct({ count: Schema.NumberFromString, expires_at_ms: Schema.NumberFromString })

/**
 * `RateLimiterStore` on PostgreSQL, for several instances sharing a database without Redis. Same
 * semantics as the library's memory and Redis stores: each taken token extends the window by
 * `refillRate`; a refused take changes nothing (neither count nor expiry), so the window still rolls
 * over on time and a refused lease does not use up tokens. One atomic upsert per take, on an UNLOGGED
 * table (no durable write); a refusal reads the window back in a second statement.
 */
export const makePgRateLimitStore = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient

  /** Takes the tokens unless that would pass `limit` in an unexpired window; no row means refused. */
  const takeIfRoom = SqlSchema.findOneOption({
    Request: Schema.Struct({ key: Schema.String, tokens: Schema.Number, now: Schema.Number, step: Schema.Number, limit: Schema.Number }),
    Result: CounterRow,
    execute: ({ key, limit, now, step, tokens }) => sql`
      INSERT INTO rate_limit_counters AS c (key, count, expires_at_ms)
      VALUES (${key}, ${tokens}, ${now + step})
      ON CONFLICT (key) DO UPDATE SET
        count = CASE WHEN c.expires_at_ms <= ${now} THEN ${tokens} ELSE c.count + ${tokens} END,
        expires_at_ms = CASE WHEN c.expires_at_ms <= ${now} THEN ${now + step} ELSE c.expires_at_ms + ${step} END
      WHERE c.expires_at_ms <= ${now} OR c.count + ${tokens} <= ${limit}
      RETURNING count::text, expires_at_ms::text`
  })

  const window = SqlSchema.findOneOption({
    Request: Schema.String,
    Result: CounterRow,
    execute: (key) => sql`SELECT count::text, expires_at_ms::text FROM rate_limit_counters WHERE key = ${key}`
  })

  const fixedWindow: Store["fixedWindow"] = (options) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const limit = options.limit ?? Number.MAX_SAFE_INTEGER
      // Whole milliseconds: a window only ever grows by under 1 ms more than the exact refill.
      const step = Math.ceil(Duration.toMillis(options.refillRate) * options.tokens)
      const taken = yield* takeIfRoom({ key: options.key, tokens: options.tokens, now, step, limit })
      if (Option.isSome(taken)) return [taken.value.count, taken.value.expires_at_ms - now] as const
      // Refused: the count the take would have reached (over the limit even if the window has moved on since).
      const current = yield* window(options.key)
      return Option.match(current, {
        onNone: () => [limit + options.tokens, step] as const,
        onSome: (row) => [Math.max(row.count + options.tokens, limit + 1), Math.max(0, row.expires_at_ms - now)] as const
      })
    }).pipe(Effect.mapError((cause) => storeFailure("rate-limit store failed", cause)))

  // Expired counters are garbage; sweep them now and then (safe on several instances at once).
  yield* Clock.currentTimeMillis.pipe(
    Effect.flatMap((now) => sql`DELETE FROM rate_limit_counters WHERE expires_at_ms < ${now - 60_000}`),
    Effect.ignore,
    Effect.repeat(Schedule.spaced(Duration.minutes(10))),
    Effect.forkScoped
  )

  return RateLimiter.RateLimiterStore.of({ fixedWindow, ...unusedMethods })
})

export const PgRateLimitStoreLive = Layer.effect(RateLimiter.RateLimiterStore, makePgRateLimitStore)
