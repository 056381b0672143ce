import { Context } from "effect"
import { type HttpApi, type HttpApiEndpoint, HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import type { Scope } from "../domain/ApiKey.js"
import type { ApiKeyRecord } from "../domain/ApiKeyRecord.js"
import { InsufficientScope, QuotaExceeded, RateLimited, Unauthorized, Unavailable } from "../domain/Problem.js"

/*
 * The security middlewares as the API definition names them (what they demand, provide and may answer).
 * Their implementations are in AuthLive.ts, so the definition (and the client built from it) never
 * loads the server's services.
 */

/** The authenticated API key of the current request. */
export class Caller extends Context.Service<Caller, ApiKeyRecord>()("pv/Caller") {}

const apiKeyScheme = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(OpenApi.Description, "API key: `Authorization: Bearer pv_live_…`. Each operation names the scope it needs.")
)
const operatorScheme = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(OpenApi.Description, "Operator token (PV_OPERATOR_TOKEN): `Authorization: Bearer <token>`. API keys are never accepted here.")
)

/**
 * API-key authentication: provides the calling key as `Caller` and counts the request against the key's
 * per-minute limit and daily quota, then refuses a key without the operation's `RequiredScope` (403
 * insufficient-scope), before anything of the request (parameters, body) is read.
 */
export class ApiKeyAuth extends HttpApiMiddleware.Service<ApiKeyAuth, { provides: Caller }>()("pv/ApiKeyAuth", {
  error: [Unauthorized, InsufficientScope, RateLimited, QuotaExceeded, Unavailable],
  security: { apiKey: apiKeyScheme }
}) {}

/** An API-key operation any valid key may call, whatever its scopes (GET /policy). */
export const AnyKey = "any-key"
/** What an API-key operation demands of the key besides being valid: one scope, or none (`AnyKey`). */
export type KeyScope = Scope | typeof AnyKey

/**
 * The one declaration of an API-key operation's scope (docs/API.md §3.2): `ApiKeyAuth` enforces it, the
 * OpenAPI document states it (src/app/Api.ts), and the authorization tests derive their matrix from it.
 * Every endpoint behind `ApiKeyAuth` has one, and only those (`requiredScopes` refuses anything else).
 */
export class RequiredScope extends Context.Service<RequiredScope, KeyScope>()("pv/RequiredScope") {}

/** The credential an endpoint's middlewares demand. */
export type Credential = "api-key" | "operator" | "none"

export const credentialOf = (endpoint: HttpApiEndpoint.Top): Credential => {
  const keys = [...endpoint.middlewares].map((middleware) => (middleware as { readonly key: string }).key)
  const apiKey = keys.includes(ApiKeyAuth.key)
  const operator = keys.includes(OperatorAuth.key)
  if (apiKey && operator) throw new Error(`${endpoint.method} ${endpoint.path}: both ApiKeyAuth and OperatorAuth`)
  return apiKey ? "api-key" : operator ? "operator" : "none"
}

/**
 * The scope of one endpoint (undefined when it is not behind `ApiKeyAuth`). Throws (so the server does
 * not start, and the definition's tests fail) when an API-key endpoint has no scope, or an endpoint
 * without `ApiKeyAuth` has one (a scope nothing would check).
 */
export const requiredScopeOf = (endpoint: HttpApiEndpoint.Top): KeyScope | undefined => {
  const credential = credentialOf(endpoint)
  const scope = Context.getOrUndefined(endpoint.annotations, RequiredScope)
  if (credential === "api-key" && scope === undefined) {
    throw new Error(`${endpoint.method} ${endpoint.path} (${endpoint.identifier}) is behind ApiKeyAuth without a RequiredScope`)
  }
  if (credential !== "api-key" && scope !== undefined) {
    throw new Error(`${endpoint.method} ${endpoint.path} (${endpoint.identifier}) has a RequiredScope but no ApiKeyAuth`)
  }
  return scope
}

/** Every endpoint of `api` with the credential it needs and, behind `ApiKeyAuth`, its scope (`requiredScopeOf`). */
export const requiredScopes = (api: HttpApi.Constraint): ReadonlyArray<{
  readonly group: string
  readonly endpoint: HttpApiEndpoint.Top
  readonly credential: Credential
  readonly scope: KeyScope | undefined
}> =>
  Object.values((api as unknown as HttpApi.Top).groups).flatMap((group) =>
    Object.values(group.endpoints).map((endpoint) => ({
      group: group.identifier,
      endpoint,
      credential: credentialOf(endpoint),
      scope: requiredScopeOf(endpoint)
    })))

/** Operator authentication for provisioning and ingestion, limited per client address. */
export class OperatorAuth extends HttpApiMiddleware.Service<OperatorAuth>()("pv/OperatorAuth", {
  error: [Unauthorized, RateLimited, Unavailable],
  security: { operator: operatorScheme }
}) {}
