import { Context } from "effect"
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import type { ApiKeyRecord } from "../domain/ApiKeyRecord.js"
import { QuotaExceeded, RateLimited, Unauthorized, Unavailable } from "../domain/Problem.js"

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
 * per-minute limit and daily quota. Scopes are checked by each operation.
 */
export class ApiKeyAuth extends HttpApiMiddleware.Service<ApiKeyAuth, { provides: Caller }>()("pv/ApiKeyAuth", {
  error: [Unauthorized, RateLimited, QuotaExceeded, Unavailable],
  security: { apiKey: apiKeyScheme }
}) {}

/** Operator authentication for provisioning and ingestion, limited per client address. */
export class OperatorAuth extends HttpApiMiddleware.Service<OperatorAuth>()("pv/OperatorAuth", {
  error: [Unauthorized, RateLimited, Unavailable],
  security: { operator: operatorScheme }
}) {}
