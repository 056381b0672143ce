import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Effect, Layer, Redacted } from "effect"
import { Unauthorized } from "../domain/Problem.js"
import { ApiKeys, Caller } from "./ApiKeys.js"
import { OperatorCredential } from "./Operator.js"

const apiKeyScheme = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(OpenApi.Description, "API key: `Authorization: Bearer pv_live_…`. Each operation names the scope it needs.")
)
const operatorScheme = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(OpenApi.Description, "Operator token (PV_OPERATOR_TOKEN): `Authorization: Bearer <token>`. API keys are never accepted here.")
)

/** API-key authentication: provides the calling key as `Caller`; scopes are checked by each operation. */
export class ApiKeyAuth extends HttpApiMiddleware.Tag<ApiKeyAuth>()("pv/ApiKeyAuth", {
  provides: Caller,
  failure: Unauthorized,
  security: { apiKey: apiKeyScheme }
}) {}

/** Operator authentication for provisioning and ingestion. */
export class OperatorAuth extends HttpApiMiddleware.Tag<OperatorAuth>()("pv/OperatorAuth", {
  failure: Unauthorized,
  security: { operator: operatorScheme }
}) {}

export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.map(ApiKeys, (keys) => ApiKeyAuth.of({ apiKey: (token) => keys.authenticate(Redacted.value(token)) }))
)

export const OperatorAuthLive = Layer.effect(
  OperatorAuth,
  Effect.map(OperatorCredential, (operator) =>
    OperatorAuth.of({ operator: (token) => operator.authenticate(Redacted.value(token)) }))
)
