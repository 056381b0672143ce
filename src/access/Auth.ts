import { HttpApiMiddleware, HttpApiSecurity, HttpServerRequest, OpenApi } from "@effect/platform"
import { Effect, Layer, Redacted, Schema } from "effect"
import { QuotaExceeded, RateLimited, Unauthorized, Unavailable } from "../domain/Problem.js"
import { AppConfig } from "../platform/Config.js"
import { ApiKeys, Caller } from "./ApiKeys.js"
import { OperatorCredential } from "./Operator.js"
import { clientAddress, RateLimits } from "./RateLimits.js"

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

export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const limits = yield* RateLimits
    return ApiKeyAuth.of({
      apiKey: (token) =>
        Effect.gen(function*() {
          const address = clientAddress(yield* HttpServerRequest.HttpServerRequest)
          yield* limits.guardAuthentication(address)
          const key = yield* keys.authenticate(Redacted.value(token)).pipe(
            Effect.tapError(() => limits.recordAuthenticationFailure(address))
          )
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
    return OperatorAuth.of({
      operator: (token) =>
        Effect.gen(function*() {
          const address = clientAddress(yield* HttpServerRequest.HttpServerRequest)
          yield* limits.guardAuthentication(address)
          yield* limits.consumeAddress("operator", address, config.operatorRateLimitPerMinute)
          yield* operator.authenticate(Redacted.value(token)).pipe(
            Effect.tapError(() => limits.recordAuthenticationFailure(address))
          )
        })
    })
  })
)
