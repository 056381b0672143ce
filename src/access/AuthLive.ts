import { Clock, Context, Effect, Layer, Redacted } from "effect"
import { HttpServerRequest } from "effect/http"
import type { HttpApiEndpoint } from "effect/http-api"
import { hashApiKey, type Scope } from "../domain/ApiKey.js"
import type { ApiKeyRecord } from "../domain/ApiKeyRecord.js"
import type { InsufficientScope, QuotaExceeded, RateLimited, Unauthorized, Unavailable } from "../domain/Problem.js"
import { countRateLimited } from "../observability/Metrics.js"
import { noteCaller } from "../observability/RequestRecord.js"
import { AppConfig } from "../platform/Config.js"
import { ApiKeys, scopeRefusal } from "./ApiKeys.js"
import { AnyKey, ApiKeyAuth, Caller, OperatorAuth, requiredScopeOf } from "../api/Auth.js"
import { ClientAddresses } from "./ClientAddress.js"
import { OperatorCredential } from "./Operator.js"
import { RateLimits } from "./RateLimits.js"

/**
 * Failed-authentication throttling refuses failures, never valid credentials (docs/API.md §3.7): an
 * address past its failure budget still has every credential checked; a valid one goes through, a
 * failing one is answered 429 instead of 401, and every failure is counted.
 */
const throttleFailures = <A, R>(
  limits: RateLimits["Service"],
  address: string,
  check: Effect.Effect<A, Unauthorized, R>
): Effect.Effect<A, Unauthorized | RateLimited, R> =>
  Effect.matchEffect(limits.guardAuthentication(address), {
    onFailure: (throttled) => checkThrottled(limits, address, check, throttled),
    onSuccess: () => checkThrottled(limits, address, check, undefined)
  })

/** The check, with every failure counted; a failure while throttled is answered 429 instead of 401. */
const checkThrottled = <A, R>(
  limits: RateLimits["Service"],
  address: string,
  check: Effect.Effect<A, Unauthorized, R>,
  throttled: RateLimited | undefined
): Effect.Effect<A, Unauthorized | RateLimited, R> =>
  Effect.catch(check, (unauthorized): Effect.Effect<never, Unauthorized | RateLimited> =>
    Effect.andThen(
      limits.recordAuthenticationFailure(address),
      throttled !== undefined
        ? Effect.andThen(countRateLimited("auth_failures"), Effect.fail<Unauthorized | RateLimited>(throttled))
        : Effect.fail<Unauthorized | RateLimited>(unauthorized)
    ))

/**
 * Each API-key endpoint's scope (null: any key), read from its `RequiredScope` on the endpoint's first
 * request; after that a request looks its endpoint up by identity, never the annotations (the endpoints
 * are the values of api/GroupApi.ts `groupApi`, one per group).
 */
const scopeTable = (): ((endpoint: HttpApiEndpoint.Top) => Scope | null) => {
  const table = new Map<HttpApiEndpoint.Top, Scope | null>()
  const add = (endpoint: HttpApiEndpoint.Top) => {
    const scope = requiredScopeOf(endpoint)
    const needed = scope === undefined || scope === AnyKey ? null : scope
    table.set(endpoint, needed)
    return needed
  }
  return (endpoint) => {
    const known = table.get(endpoint)
    return known !== undefined ? known : add(endpoint)
  }
}

/**
 * The API-key middleware: the key is checked (and failures throttled) before the key's limits are
 * counted, then the key's scope against the endpoint's `RequiredScope` (403 insufficient-scope, after the
 * limits, before the request's parameters and body are read); the endpoint then runs with the key as
 * `Caller`. The RateLimit fields are set by `RateLimits.consumeKeyAt` on the request's Node response, so they
 * are on answers and refusals alike.
 */
export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const limits = yield* RateLimits
    const addresses = yield* ClientAddresses
    const scopeOf = scopeTable()
    /** Once the key is known and its limits allowed the request: the scope, then the endpoint as the key. */
    const answerFor = <A, E, R>(
      httpEffect: Effect.Effect<A, E, R>,
      endpoint: HttpApiEndpoint.Top,
      key: ApiKeyRecord
    ): Effect.Effect<A, E | InsufficientScope, Exclude<R, Caller>> => {
      keys.markUsedUnsafe(key.key_id)
      const scope = scopeOf(endpoint)
      const refused = scope === null ? undefined : scopeRefusal(key, scope)
      return refused === undefined ? Effect.provideService(httpEffect, Caller, key) : Effect.fail(refused)
    }
    /** The key is valid: its limits (the request log names it by id and tenant, also when a limit refuses it). */
    const counted = <A, E, R>(
      httpEffect: Effect.Effect<A, E, R>,
      endpoint: HttpApiEndpoint.Top,
      request: HttpServerRequest.HttpServerRequest,
      key: ApiKeyRecord,
      now: number
    ): Effect.Effect<A, E | InsufficientScope | RateLimited | QuotaExceeded | Unavailable, Exclude<R, Caller>> => {
      noteCaller(request, key.key_id, key.tenant_id)
      const rest = limits.consumeKeyAt(key, request, now)
      return rest === undefined ? answerFor(httpEffect, endpoint, key) : Effect.flatMap(rest, () => answerFor(httpEffect, endpoint, key))
    }
    return ApiKeyAuth.of({
      apiKey: (httpEffect, { credential, endpoint }) =>
        Effect.withFiber((fiber) => {
          const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
          const token = Redacted.value(credential)
          // The usual request (its key's record cached, active) is decided here at once; the throttling of
          // failures (which never refuses a valid key) and every other case take the general path.
          const now = fiber.getRef(Clock.Clock).currentTimeMillisUnsafe()
          const keyHash = hashApiKey(token)
          const known = keys.authenticatedNow(keyHash, now)
          if (known !== undefined) return counted(httpEffect, endpoint, request, known, now)
          return Effect.flatMap(
            throttleFailures(limits, addresses.of(request), keys.authenticate(token, keyHash)),
            (key) => Effect.clockWith((clock) => counted(httpEffect, endpoint, request, key, clock.currentTimeMillisUnsafe()))
          )
        })
    })
  })
)

/** The operator middleware: the per-address operator limit first, then the (throttled) token check. */
export const OperatorAuthLive = Layer.effect(
  OperatorAuth,
  Effect.gen(function*() {
    const operator = yield* OperatorCredential
    const limits = yield* RateLimits
    const config = yield* AppConfig
    const addresses = yield* ClientAddresses
    return OperatorAuth.of({
      operator: (httpEffect, { credential }) =>
        Effect.gen(function*() {
          const address = addresses.of(yield* HttpServerRequest.HttpServerRequest)
          yield* limits.consumeAddress("operator", address, config.operatorRateLimitPerMinute)
          yield* throttleFailures(limits, address, operator.authenticate(Redacted.value(credential)))
          return yield* httpEffect
        })
    })
  })
)
