import { Effect, Layer, Redacted } from "effect"
import { HttpServerRequest } from "effect/http"
import type { RateLimited, Unauthorized } from "../domain/Problem.js"
import { countRateLimited } from "../observability/Metrics.js"
import { noteCaller } from "../observability/RequestRecord.js"
import { AppConfig } from "../platform/Config.js"
import { ApiKeys } from "./ApiKeys.js"
import { ApiKeyAuth, Caller, OperatorAuth } from "./Auth.js"
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
 * The API-key middleware: the key is checked (and failures throttled) before the key's limits are
 * counted; the endpoint then runs with the key as `Caller`. The RateLimit fields are set by
 * `RateLimits.consumeKey` as a pre-response handler, so they are on answers and refusals alike.
 */
export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const limits = yield* RateLimits
    const addresses = yield* ClientAddresses
    return ApiKeyAuth.of({
      apiKey: (httpEffect, { credential }) =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          Effect.flatMap(
            throttleFailures(limits, addresses.of(request), keys.authenticate(Redacted.value(credential))),
            (key) => {
              // The request log names the key by id and tenant (never the key), also when a limit refuses it.
              noteCaller(request, key.key_id, key.tenant_id)
              return Effect.flatMap(limits.consumeKey(key), () => {
                keys.markUsedUnsafe(key.key_id)
                return Effect.provideService(httpEffect, Caller, key)
              })
            }
          ))
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
