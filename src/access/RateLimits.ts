import { Context, Duration, Effect, Fiber, Layer, Option } from "effect"
import { HttpEffect, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { RateLimiter } from "effect/persistence"
import type { ApiKeyRecord } from "../domain/ApiKeyRecord.js"
import { QuotaExceeded, RateLimited, Unavailable } from "../domain/Problem.js"
import { countQuotaExceeded, countRateLimited } from "../observability/Metrics.js"
import { RequestId } from "../observability/RequestRecord.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"
import { WindowCounters, memoryStore } from "./Counters.js"
import { type CounterBackend, leased } from "./LeasedStore.js"
import { PgRateLimitStoreLive } from "./PgRateLimitStore.js"
import { layerRedisStore } from "./RedisStore.js"

const MINUTE_MS = 60_000
const DAY_MS = 86_400_000

/** Seconds until the next UTC midnight: when a daily quota comes back. */
export const secondsUntilUtcMidnight = (nowMs: number): number => Math.max(1, Math.ceil((DAY_MS - (nowMs % DAY_MS)) / 1000))

/** The UTC day a request counts against. */
export const utcDay = (nowMs: number): string => new Date(nowMs).toISOString().slice(0, 10)

/** `utcDay` for the hot path: the day's name is formatted once per day, not once per request. Each RateLimits service has its own. */
const makeUtcDayCached = () => {
  let dayCache = { start: 0, end: 0, name: utcDay(0) }
  return (nowMs: number): string => {
    if (nowMs < dayCache.start || nowMs >= dayCache.end) {
      const start = nowMs - (((nowMs % DAY_MS) + DAY_MS) % DAY_MS)
      dayCache = { start, end: start + DAY_MS, name: utcDay(nowMs) }
    }
    return dayCache.name
  }
}

const policyFieldOf = (key: ApiKeyRecord): string =>
  `"minute";q=${key.rate_limit_per_minute};w=60, "day";q=${key.daily_quota};w=86400`

/** The RateLimit field of a key's minute window. */
const minuteFieldOf = (remaining: number, resetSeconds: number) => `"minute";r=${Math.max(0, remaining)};t=${Math.max(0, resetSeconds)}`

const headersWith = (policy: string, remaining: number, resetSeconds: number): Record<string, string> => ({
  "ratelimit-policy": policy,
  ratelimit: minuteFieldOf(remaining, resetSeconds)
})

/** IETF RateLimit fields (docs/API.md §4.1) for a key, given what is left of its minute. */
export const rateLimitHeaders = (key: ApiKeyRecord, remaining: number, resetSeconds: number): Record<string, string> =>
  headersWith(policyFieldOf(key), remaining, resetSeconds)

/**
 * What the hot path needs of a key record, made once per record (records are cached, see ApiKeys.ts): its
 * RateLimit-Policy field and its counters' names (the day's is remade when the UTC day changes). Each
 * RateLimits service has its own.
 */
interface KeyFields {
  readonly policy: string
  readonly minuteCounter: string
  /** The UTC day `dayCounter` counts (utcDayCached's name). */
  day: string
  dayCounter: string
}

const makeKeyFields = () => {
  const fields = new WeakMap<ApiKeyRecord, KeyFields>()
  return (key: ApiKeyRecord): KeyFields => {
    let found = fields.get(key)
    if (found === undefined) {
      found = { policy: policyFieldOf(key), minuteCounter: `min:${key.key_id}`, day: "", dayCounter: "" }
      fields.set(key, found)
    }
    return found
  }
}

const storeUnavailable = new Unavailable({ detail: "Rate limiting is unavailable; retry shortly." })

/** The counter backend this deployment uses (see RateLimitStoreLive). */
export class RateLimitBackend extends Context.Service<RateLimitBackend, CounterBackend>()("pv/RateLimitBackend") {}

interface Allowed {
  readonly remaining: number
  readonly resetMs: number
}

export interface RateLimitsShape {
  /**
   * Counts one request of `key` at `now` and sets the RateLimit fields on whatever response follows (answer or
   * refusal), done at once where it can be: undefined when both windows allowed the request from local state
   * (the usual case; the fields are set), else the rest of it to run.
   */
  readonly consumeKeyAt: (
    key: ApiKeyRecord,
    request: HttpServerRequest.HttpServerRequest,
    now: number
  ) => Effect.Effect<void, RateLimited | QuotaExceeded | Unavailable> | undefined
  /** Per-address limit for traffic without a key (the human endpoint) and for operator endpoints. */
  readonly consumeAddress: (bucket: "human" | "operator" | "log", address: string, limitPerMinute: number) => Effect.Effect<void, RateLimited | Unavailable>
  /**
   * `consumeAddress` decided at once from local state: true when the request was counted and is allowed. False
   * when that takes the shared store, or the request is over the limit; the caller then runs `consumeAddress`,
   * which answers (a request already over the limit is counted again, which changes no answer).
   */
  readonly allowAddressNow: (bucket: "log", address: string, limitPerMinute: number, now: number) => boolean
  /** Whether an address has failed authentication too often this minute. */
  readonly guardAuthentication: (address: string) => Effect.Effect<void, RateLimited>
  readonly recordAuthenticationFailure: (address: string) => Effect.Effect<void>
}

class Exceeded {
  readonly _tag = "Exceeded"
  constructor(readonly retryMs: number) {}
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000))

const makeRateLimits = Effect.gen(function*() {
  const backend = yield* RateLimitBackend
  const config = yield* AppConfig
  const utcDayCached = makeUtcDayCached()
  const keyFields = makeKeyFields()
  /** The counter of `key`'s UTC day that `now` falls in. */
  const dayCounterOf = (key: ApiKeyRecord, fields: KeyFields, now: number): string => {
    const day = utcDayCached(now)
    if (fields.day !== day) {
      fields.day = day
      fields.dayCounter = `day:${key.key_id}:${day}`
    }
    return fields.dayCounter
  }
  /**
   * Sets the RateLimit fields on whatever answer the current request gets (answer or refusal): on its record, whose
   * headers the edge puts on the answer (http/Edge.ts), else (no record) the pre-response handler to register.
   */
  const setFieldsNow = (
    _request: HttpServerRequest.HttpServerRequest,
    policy: string,
    remaining: number,
    resetSeconds: number
  ): Effect.Effect<void> | undefined => {
    const fiber = Fiber.getCurrent()
    const record = fiber === undefined ? undefined : Context.get(fiber.context, RequestId)
    if (record === undefined) return setHeadersUnsafe(headersWith(policy, remaining, resetSeconds))
    record.headers["ratelimit-policy"] = policy
    record.headers.ratelimit = minuteFieldOf(remaining, resetSeconds)
    return undefined
  }
  const setFields = (request: HttpServerRequest.HttpServerRequest, key: ApiKeyRecord, remaining: number, resetSeconds: number): Effect.Effect<void> =>
    setFieldsNow(request, keyFields(key).policy, remaining, resetSeconds) ?? Effect.void

  /** One request against `limit` per `windowMs` (fixed-window semantics of the library's stores). */
  const take = (key: string, limit: number, windowMs: number): Effect.Effect<Allowed, Exceeded | Unavailable> =>
    Effect.clockWith((clock) => {
      const refillMs = windowMs / limit
      const local = backend.trySpend(key, limit, refillMs, clock.currentTimeMillisUnsafe())
      if (local !== undefined) return judge(local, limit)
      return backend.store.fixedWindow({ key, tokens: 1, refillRate: Duration.millis(refillMs), limit }).pipe(
        Effect.catch((error) => Effect.andThen(Effect.logWarning("rate-limit store failed", error), Effect.fail(storeUnavailable))),
        Effect.flatMap((taken) => judge(taken, limit))
      )
    })

  const judge = ([count, ttl]: readonly [number, number], limit: number): Effect.Effect<Allowed, Exceeded> =>
    count > limit ? Effect.fail(new Exceeded(ttl)) : Effect.succeed({ remaining: limit - count, resetMs: ttl })

  /** The day's take, once the minute allowed the request. */
  const takeDay = (key: ApiKeyRecord, now: number) =>
    Effect.catchTag(take(dayCounterOf(key, keyFields(key), now), key.daily_quota, DAY_MS), "Exceeded", () => takeDayRefused(key, now))

  /**
   * Counts one request of `key`; sets the RateLimit fields on whatever response follows (answer or refusal).
   * When both windows can be answered from local state (the usual case), that is decided here at once,
   * with one clock reading; otherwise the general path below (which may wait on the shared store).
   */
  const consumeKeyAt = (
    key: ApiKeyRecord,
    request: HttpServerRequest.HttpServerRequest,
    now: number
  ): Effect.Effect<void, RateLimited | QuotaExceeded | Unavailable> | undefined => {
    const fields = keyFields(key)
    const minuteLimit = key.rate_limit_per_minute
    const minute = backend.trySpend(fields.minuteCounter, minuteLimit, MINUTE_MS / minuteLimit, now)
    if (minute === undefined || minute[0] > minuteLimit) return consumeKeySlow(key, request, minute)
    const set = setFieldsNow(request, fields.policy, minuteLimit - minute[0], Math.ceil(minute[1] / 1000))
    const dayLimit = key.daily_quota
    const day = backend.trySpend(dayCounterOf(key, fields, now), dayLimit, DAY_MS / dayLimit, now)
    if (day !== undefined && day[0] <= dayLimit) return set
    const rest = Effect.asVoid(day === undefined ? takeDay(key, now) : Effect.catchTag(judge(day, dayLimit), "Exceeded", () => takeDayRefused(key, now)))
    return set === undefined ? rest : Effect.andThen(set, rest)
  }

  const takeDayRefused = (key: ApiKeyRecord, now: number) =>
    Effect.andThen(countQuotaExceeded, Effect.fail(new QuotaExceeded({
      detail: `This key's daily quota of ${key.daily_quota} requests is used up until 00:00 UTC.`,
      retry_after: secondsUntilUtcMidnight(now)
    })))

  /** The general path: the minute's local answer (if there was one) is used, never taken twice. */
  const consumeKeySlow = (
    key: ApiKeyRecord,
    request: HttpServerRequest.HttpServerRequest,
    local: readonly [number, number] | undefined
  ): Effect.Effect<void, RateLimited | QuotaExceeded | Unavailable> =>
    (local !== undefined ? judge(local, key.rate_limit_per_minute) : take(keyFields(key).minuteCounter, key.rate_limit_per_minute, MINUTE_MS)).pipe(
      Effect.catchTag("Exceeded", (e) =>
        Effect.andThen(
          Effect.andThen(countRateLimited("key"), setFields(request, key, 0, seconds(e.retryMs))),
          Effect.fail(new RateLimited({
            detail: `This key allows ${key.rate_limit_per_minute} requests per minute.`,
            retry_after: seconds(e.retryMs)
          }))
        )),
      Effect.tap((minute) => setFields(request, key, minute.remaining, Math.ceil(minute.resetMs / 1000))),
      Effect.andThen(Effect.clockWith((clock) => takeDay(key, clock.currentTimeMillisUnsafe()))),
      Effect.asVoid
    )

  /** Per-address limit for traffic without a key (the human endpoint) and for operator endpoints. */
  const consumeAddress = (bucket: "human" | "operator" | "log", address: string, limitPerMinute: number) =>
    take(`${bucket}:${address}`, limitPerMinute, MINUTE_MS).pipe(
      Effect.asVoid,
      Effect.catchTag("Exceeded", (e) =>
        Effect.andThen(countRateLimited(bucket), Effect.fail(new RateLimited({
          detail: `At most ${limitPerMinute} requests per minute from one address.`,
          retry_after: seconds(e.retryMs)
        }))))
    )

  const allowAddressNow = (bucket: "log", address: string, limitPerMinute: number, now: number): boolean => {
    const local = backend.trySpend(`${bucket}:${address}`, limitPerMinute, MINUTE_MS / limitPerMinute, now)
    return local !== undefined && local[0] <= limitPerMinute
  }

  const failureLimit = config.authFailureLimitPerMinute
  // Addresses over the failure limit, until when. Failures are counted in the shared store; any instance
  // whose own failure count comes back over the limit blocks the address here, so guessing stays slow
  // everywhere while the guard itself costs nothing.
  const blockedUntil = new Map<string, number>()

  /** Whether an address has failed authentication too often this minute (its failing attempts then get 429; valid credentials still pass, see api/Auth.ts). */
  const guardAuthentication = (address: string): Effect.Effect<void, RateLimited> =>
    blockedUntil.size === 0 ? Effect.void : Effect.clockWith((clock) => {
      const now = clock.currentTimeMillisUnsafe()
      const until = blockedUntil.get(address)
      if (until === undefined) return Effect.void
      if (until <= now) {
        blockedUntil.delete(address)
        return Effect.void
      }
      return Effect.fail(new RateLimited({
        detail: "Too many failed authentications from this address; slow down.",
        retry_after: seconds(until - now)
      }))
    })

  const block = (address: string, forMs: number) =>
    Effect.clockWith((clock) =>
      Effect.sync(() => {
        if (blockedUntil.size > 100_000) blockedUntil.clear()
        blockedUntil.set(address, clock.currentTimeMillisUnsafe() + forMs)
      }))

  /** The failure that uses up the address's budget blocks it for the rest of the window. */
  const recordAuthenticationFailure = (address: string) =>
    take(`authfail:${address}`, failureLimit, MINUTE_MS).pipe(
      Effect.flatMap((state) => state.remaining <= 0 ? block(address, state.resetMs) : Effect.void),
      Effect.catchTag("Exceeded", (e) => block(address, e.retryMs)),
      Effect.ignore
    )

  return {
    // Once per request (keyed, human, operator, log reads): no span (docs/ARCHITECTURE.md, the services rule).
    consumeKeyAt,
    consumeAddress,
    allowAddressNow,
    guardAuthentication,
    recordAuthenticationFailure: Effect.fn("RateLimits.recordAuthenticationFailure")(recordAuthenticationFailure)
  } satisfies RateLimitsShape
})

/** For a request that did not come through a Node server (none of the service's own): a pre-response handler. */
const setHeadersUnsafe = (headers: Record<string, string>): Effect.Effect<void> =>
  Effect.withFiber((fiber) => {
    HttpEffect.appendPreResponseHandlerUnsafe(fiber.context, (_request, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers)))
    return Effect.void
  })

const leasedBackend = <E, R>(store: Layer.Layer<RateLimiter.RateLimiterStore, E, R>) =>
  Layer.effect(RateLimitBackend, Effect.map(RateLimiter.RateLimiterStore, (shared) => leased(shared))).pipe(Layer.provide(store))

const memoryBackend = Layer.sync(RateLimitBackend, () => {
  const counters = new WindowCounters()
  return {
    store: memoryStore(counters),
    trySpend: (key, limit, refillMs, now) => counters.take(key, 1, refillMs, limit, now)
  }
})

/**
 * Where the counters live: Redis when REDIS_URL is set, else PostgreSQL (both behind a local lease, see
 * LeasedStore.ts), else this process (the embedded database has one instance).
 */
export const RateLimitStoreLive = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const mode = yield* DatabaseMode
    if (Option.isSome(config.redisUrl)) return leasedBackend(layerRedisStore(config.redisUrl.value, "pv:ratelimit:"))
    return mode.kind === "postgres" ? leasedBackend(PgRateLimitStoreLive) : memoryBackend
  })
)

/**
 * Per-key limits (requests per minute, requests per UTC day), per-address limits for unauthenticated
 * and operator traffic, and throttling of failed authentications per address. Counters live where the
 * deployment keeps them: in this process (embedded, one instance), or in Redis (REDIS_URL) or PostgreSQL
 * behind a local lease. A request whose counters are local is decided without waiting on anything; a
 * store failure refuses the request (503) rather than letting unlimited traffic through.
 */
export class RateLimits extends Context.Service<RateLimits, RateLimitsShape>()("pv/RateLimits", {
  make: makeRateLimits
}) {
  /** Needs RateLimitBackend and AppConfig. */
  static readonly layerNoDeps = Layer.effect(this, this.make)
  /** The counters where this deployment keeps them (RateLimitStoreLive); needs AppConfig, DatabaseMode and, on PostgreSQL, PgClient. */
  static readonly layer = this.layerNoDeps.pipe(Layer.provide(RateLimitStoreLive))
}
