import { HttpApiMiddleware, HttpApiSecurity, HttpServerRequest, OpenApi } from "@effect/platform"
import { Effect, Layer, Option, Redacted, Schema } from "effect"
import { QuotaExceeded, RateLimited, Unauthorized, Unavailable } from "../domain/Problem.js"
import { countRateLimited } from "../observability/Metrics.js"
import { noteCaller } from "../observability/RequestRecord.js"
import { AppConfig } from "../platform/Config.js"
import { ApiKeys, Caller } from "./ApiKeys.js"
import { OperatorCredential } from "./Operator.js"
import { ClientAddresses } from "./ClientAddress.js"
import { RateLimits } from "./RateLimits.js"

const apiKeyScheme = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(OpenApi.Description, "API key: `Authorization: Bearer pv_live_…`. Each operation names the scope it needs.")
)
const operatorScheme = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(OpenApi.Description, "Operator token (PV_OPERATOR_TOKEN): `Authorization: Bearer <token>`. API keys are never accepted here.")
)

/**
 * API-key authentication: provides the calling key as `Caller` and counts the request against the key's
 * per-minute limit and daily quota. Scopes are checked by each operation.
 */
export class ApiKeyAuth extends HttpApiMiddleware.Tag<ApiKeyAuth>()("pv/ApiKeyAuth", {
  provides: Caller,
  failure: Schema.Union(Unauthorized, RateLimited, QuotaExceeded, Unavailable),
  security: { apiKey: apiKeyScheme }
}) {}

/** Operator authentication for provisioning and ingestion, limited per client address. */
export class OperatorAuth extends HttpApiMiddleware.Tag<OperatorAuth>()("pv/OperatorAuth", {
  failure: Schema.Union(Unauthorized, RateLimited, Unavailable),
  security: { operator: operatorScheme }
}) {}

/**
 * Failed-authentication throttling refuses failures, never valid credentials (CONTRACT section 11): an
 * address past its failure budget still has every credential checked; a valid one goes through, a
 * failing one is answered 429 instead of 401, and every failure is counted.
 */
const throttleFailures = <A, R>(
  limits: RateLimits,
  address: string,
  check: Effect.Effect<A, Unauthorized, R>
): Effect.Effect<A, Unauthorized | RateLimited, R> =>
  Effect.flatMap(Effect.option(Effect.flip(limits.guardAuthentication(address))), (throttled) =>
    check.pipe(
      Effect.tapError(() => limits.recordAuthenticationFailure(address)),
      Effect.catchAll((unauthorized): Effect.Effect<never, Unauthorized | RateLimited> =>
        Option.isSome(throttled) ? Effect.zipRight(countRateLimited("auth_failures"), Effect.fail(throttled.value)) : Effect.fail(unauthorized))
    ))

export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const limits = yield* RateLimits
    const addresses = yield* ClientAddresses
    return ApiKeyAuth.of({
      apiKey: (token) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const address = addresses.of(request)
          const key = yield* throttleFailures(limits, address, keys.authenticate(Redacted.value(token)))
          // The request log names the key by id and tenant (never the key), also when a limit refuses it.
          noteCaller(request, key.key_id, key.tenant_id)
          yield* limits.consumeKey(key)
          yield* keys.markUsed(key.key_id)
          return key
        })
    })
  })
)

export const OperatorAuthLive = Layer.effect(
  OperatorAuth,
  Effect.gen(function*() {
    const operator = yield* OperatorCredential
    const limits = yield* RateLimits
    const config = yield* AppConfig
    const addresses = yield* ClientAddresses
    return OperatorAuth.of({
      operator: (token) =>
        Effect.gen(function*() {
          const address = addresses.of(yield* HttpServerRequest.HttpServerRequest)
          yield* limits.consumeAddress("operator", address, config.operatorRateLimitPerMinute)
          yield* throttleFailures(limits, address, operator.authenticate(Redacted.value(token)))
        })
    })
  })
)
