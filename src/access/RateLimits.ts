import { RateLimiter } from "@effect/experimental"
import * as RedisStore from "@effect/experimental/RateLimiter/Redis"
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Duration, Effect, Layer, Option, Redacted } from "effect"
import type { ApiKeyRecord } from "../domain/AccessKey.js"
import { QuotaExceeded, RateLimited, Unavailable } from "../domain/Problem.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"
import { leasedStore } from "./LeasedStore.js"
import { PgRateLimitStoreLive } from "./PgRateLimitStore.js"

const MINUTE = Duration.minutes(1)
const DAY_MS = 86_400_000

/** Seconds until the next UTC midnight: when a daily quota comes back. */
export const secondsUntilUtcMidnight = (nowMs: number): number => Math.max(1, Math.ceil((DAY_MS - (nowMs % DAY_MS)) / 1000))

/** The UTC day a request counts against. */
export const utcDay = (nowMs: number): string => new Date(nowMs).toISOString().slice(0, 10)

/** IETF RateLimit fields (contract section 3) for a key, given what is left of its minute. */
export const rateLimitHeaders = (key: ApiKeyRecord, remaining: number, resetSeconds: number): Record<string, string> => ({
  "ratelimit-policy": `"minute";q=${key.rate_limit_per_minute};w=60, "day";q=${key.daily_quota};w=86400`,
  ratelimit: `"minute";r=${Math.max(0, remaining)};t=${Math.max(0, resetSeconds)}`
})

export const clientAddress = (request: HttpServerRequest.HttpServerRequest): string =>
  Option.getOrElse(request.remoteAddress, () => "unknown")

const storeUnavailable = new Unavailable({ detail: "Rate limiting is unavailable; retry shortly." })

const retrySeconds = (e: RateLimiter.RateLimitExceeded) => Math.max(1, Math.ceil(Duration.toMillis(e.retryAfter) / 1000))

/** The library's two errors share one tag; `reason` tells an exceeded limit from a failed store. */
const onLimiterError = <E>(onExceeded: (e: RateLimiter.RateLimitExceeded) => Effect.Effect<never, E>) =>
  (error: RateLimiter.RateLimiterError): Effect.Effect<never, E | Unavailable> =>
    error.reason === "Exceeded"
      ? onExceeded(error)
      : Effect.zipRight(Effect.logWarning("rate-limit store failed", error), Effect.fail(storeUnavailable))

/**
 * Per-key limits (requests per minute, requests per UTC day), per-address limits for unauthenticated
 * and operator traffic, and throttling of failed authentications per address. Counters live in the
 * store the deployment shares: memory (embedded, one instance), Redis (REDIS_URL) or PostgreSQL.
 * A store failure refuses the request (503) rather than letting unlimited traffic through.
 */
export class RateLimits extends Effect.Service<RateLimits>()("pv/RateLimits", {
  effect: Effect.gen(function*() {
    const limiter = yield* RateLimiter.make
    const config = yield* AppConfig

    const take = (key: string, limit: number, window: Duration.DurationInput) =>
      limiter.consume({ key, limit, window, algorithm: "fixed-window", onExceeded: "fail" })

    /** Counts one request of `key`; sets the RateLimit fields on whatever response follows. */
    const consumeKey = (key: ApiKeyRecord): Effect.Effect<void, RateLimited | QuotaExceeded | Unavailable> =>
      Effect.gen(function*() {
        const minute = yield* take(`min:${key.key_id}`, key.rate_limit_per_minute, MINUTE).pipe(
          Effect.catchAll(onLimiterError((e) =>
            setHeaders(rateLimitHeaders(key, 0, retrySeconds(e))).pipe(
              Effect.zipRight(Effect.fail(new RateLimited({
                detail: `This key allows ${key.rate_limit_per_minute} requests per minute.`,
                retry_after: retrySeconds(e)
              })))
            )))
        )
        yield* setHeaders(rateLimitHeaders(key, minute.remaining, Math.ceil(Duration.toMillis(minute.resetAfter) / 1000)))
        const now = yield* Clock.currentTimeMillis
        yield* take(`day:${key.key_id}:${utcDay(now)}`, key.daily_quota, Duration.days(1)).pipe(
          Effect.catchAll(onLimiterError(() =>
            Effect.fail(new QuotaExceeded({
              detail: `This key's daily quota of ${key.daily_quota} requests is used up until 00:00 UTC.`,
              retry_after: secondsUntilUtcMidnight(now)
            }))))
        )
      })

    /** Per-address limit for traffic without a key (the human endpoint) and for operator endpoints. */
    const consumeAddress = (bucket: "human" | "operator", address: string, limitPerMinute: number) =>
      take(`${bucket}:${address}`, limitPerMinute, MINUTE).pipe(
        Effect.asVoid,
        Effect.catchAll(onLimiterError((e) =>
          Effect.fail(new RateLimited({
            detail: `At most ${limitPerMinute} requests per minute from one address.`,
            retry_after: retrySeconds(e)
          }))))
      )

    const failureLimit = config.authFailureLimitPerMinute
    // Addresses over the failure limit, until when. Failures are counted in the shared store; any instance
    // whose own failure count comes back over the limit blocks the address here, so guessing stays slow
    // everywhere while the guard itself costs nothing.
    const blockedUntil = new Map<string, number>()

    /** Refuses an address that has failed authentication too often this minute, before any key lookup. */
    const guardAuthentication = (address: string): Effect.Effect<void, RateLimited> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const until = blockedUntil.get(address)
        if (until === undefined) return Effect.void
        if (until <= now) {
          blockedUntil.delete(address)
          return Effect.void
        }
        return Effect.fail(new RateLimited({
          detail: "Too many failed authentications from this address; slow down.",
          retry_after: Math.ceil((until - now) / 1000)
        }))
      })

    const block = (address: string, forMs: number) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.sync(() => {
          if (blockedUntil.size > 100_000) blockedUntil.clear()
          blockedUntil.set(address, now + forMs)
        }))

    /** The failure that uses up the address's budget blocks it for the rest of the window. */
    const recordAuthenticationFailure = (address: string) =>
      take(`authfail:${address}`, failureLimit, MINUTE).pipe(
        Effect.flatMap((state) => state.remaining <= 0 ? block(address, Duration.toMillis(state.resetAfter)) : Effect.void),
        Effect.catchAll((e) => e.reason === "Exceeded" ? block(address, Duration.toMillis(e.retryAfter)) : Effect.void)
      )

    return { consumeKey, consumeAddress, guardAuthentication, recordAuthenticationFailure } as const
  })
}) {}

const setHeaders = (headers: Record<string, string>) =>
  HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers)))

/**
 * The library's Redis script sets `PX` to refill × tokens, and Redis refuses a fractional expiry
 * (60 000 ms / 7 requests = 8571.43 ms), so round the refill interval up to a whole millisecond:
 * windows grow by under 1 ms per token, which only ever errs on the side of fewer requests.
 */
export const wholeMillisecondRefill = (store: RateLimiter.RateLimiterStore["Type"]): RateLimiter.RateLimiterStore["Type"] => {
  const whole = (refill: Duration.Duration) => Duration.millis(Math.ceil(Duration.toMillis(refill)))
  return RateLimiter.RateLimiterStore.of({
    fixedWindow: (options) => store.fixedWindow({ ...options, refillRate: whole(options.refillRate) }),
    tokenBucket: (options) => store.tokenBucket({ ...options, refillRate: whole(options.refillRate) })
  })
}

const leased = <E, R>(store: Layer.Layer<RateLimiter.RateLimiterStore, E, R>) =>
  Layer.effect(RateLimiter.RateLimiterStore, Effect.map(RateLimiter.RateLimiterStore, leasedStore)).pipe(Layer.provide(store))

/**
 * The counter store this deployment shares: Redis when REDIS_URL is set, else PostgreSQL (both behind a
 * local lease, see LeasedStore.ts), else memory (the embedded database has one instance).
 */
export const RateLimitStoreLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const mode = yield* DatabaseMode
    if (Option.isSome(config.redisUrl)) {
      const url = new URL(Redacted.value(config.redisUrl.value))
      return leased(Layer.effect(RateLimiter.RateLimiterStore, Effect.map(RateLimiter.RateLimiterStore, wholeMillisecondRefill)).pipe(Layer.provide(RedisStore.layerStore({
        host: url.hostname,
        port: Number(url.port || 6379),
        ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
        ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
        db: Number(url.pathname.slice(1) || 0),
        prefix: "pv:ratelimit:"
      }))))
    }
    return mode.kind === "postgres" ? leased(PgRateLimitStoreLive) : RateLimiter.layerStoreMemory
  })
)

export const RateLimitsLive = RateLimits.Default.pipe(Layer.provide(RateLimitStoreLive))
