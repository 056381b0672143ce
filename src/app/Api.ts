import { HttpApi, OpenApi } from "effect/http-api"
import { ApiKeysApi } from "../access/Api.js"
import { AnyKey, requiredScopes } from "../api/Auth.js"
import { EventsApi } from "../events/Api.js"
import { SubscriptionsApi } from "../webhooks/SubscriptionsApi.js"
import { LogApi, RootLogApi } from "../log/Api.js"
import { McpApi } from "../mcp/Api.js"
import { ReceiptsApi } from "../receipts/Api.js"
import { DeterminationsApi } from "../trust/DeterminationsApi.js"
import { TrustApi } from "../trust/Api.js"
import { ApiId, withEdgeRules } from "../api/GroupApi.js"
import { SystemApi } from "../api/SystemApi.js"
import { WebhooksApi } from "../webhooks/Api.js"

/**
 * Every problem class encodes through the one ProblemDocument schema, so where an operation declares two
 * problems with the same status HttpApi writes `anyOf` of two identical `$ref`s: they are one schema.
 */
const collapseIdenticalAnyOf = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(collapseIdenticalAnyOf)
  if (typeof value !== "object" || value === null) return value
  const entries = Object.entries(value).map(([k, v]) => [k, collapseIdenticalAnyOf(v)] as const)
  const node = Object.fromEntries(entries) as Record<string, unknown>
  const anyOf = node.anyOf
  if (Array.isArray(anyOf) && Object.keys(node).length === 1 && anyOf.length > 0) {
    const first = JSON.stringify(anyOf[0])
    if (anyOf.every((member) => JSON.stringify(member) === first)) return anyOf[0]
  }
  return node
}

const operationMethods = ["get", "put", "post", "delete", "patch", "head", "options"] as const

/**
 * The credential of every operation, written into the document from the definition (api/Auth.ts), never
 * by hand: the summary ends with it ("(scope trust:read)", "(any API key)", "(operator)"), `x-required-scope`
 * names an API-key operation's scope, and its security requirement lists the scope (OpenAPI 3.1 lets a
 * non-OAuth requirement name the roles it needs). Operations are found by operationId (`group.endpoint`);
 * an API-key operation missing from the document is an error, so the two cannot part.
 */
const documentCredentials = (definition: HttpApi.Constraint, spec: OpenApi.OpenAPISpec): OpenApi.OpenAPISpec => {
  const byId = new Map<string, OpenApi.OpenAPISpecOperation>()
  for (const item of Object.values(spec.paths)) {
    for (const method of operationMethods) {
      const operation = item[method]
      if (operation?.operationId !== undefined) byId.set(operation.operationId, operation)
    }
  }
  for (const { group, endpoint, credential, scope } of requiredScopes(definition)) {
    if (credential === "none") continue
    const operation = byId.get(`${group}.${endpoint.identifier}`)
    if (operation === undefined) throw new Error(`no OpenAPI operation ${group}.${endpoint.identifier} to document its credential`)
    const needs = credential === "operator" ? "operator" : scope === AnyKey ? "any API key" : `scope ${scope}`
    operation.summary = operation.summary === undefined ? needs : `${operation.summary} (${needs})`
    if (credential === "api-key" && scope !== AnyKey && scope !== undefined) {
      ;(operation as unknown as Record<string, unknown>)["x-required-scope"] = scope
      operation.security = operation.security.map((requirement) =>
        Object.fromEntries(Object.entries(requirement).map(([name, roles]) => [name, name === "apiKey" ? [scope] : roles])))
    }
  }
  return spec
}

/**
 * The whole REST surface; OpenAPI is generated from this one definition. Errors are the domain's problem
 * classes (src/domain/Problem.ts), which HttpApi itself renders as application/problem+json and documents;
 * the edge rules every group shares (api/GroupApi.ts `withEdgeRules`): `RequestGuard`'s answers, strict bodies.
 */
const Definition = withEdgeRules(HttpApi.make(ApiId)
  .add(SystemApi)
  .add(TrustApi)
  .add(DeterminationsApi)
  .add(ApiKeysApi)
  .add(ReceiptsApi)
  .add(McpApi)
  .add(EventsApi)
  .add(SubscriptionsApi)
  .add(WebhooksApi)
  .add(LogApi)
  .add(RootLogApi))
  .annotate(OpenApi.Title, "Trust Resolution and Reliance Receipt Service")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description,
    "Resolves determinations (DET-V1-*, QUAL-V1-*) into canonical pv.machine-trust.v1 documents. " +
    "Credential issuance is NOT_AUTHORIZED: no response implies an issued credential. Errors are RFC 9457 problem+json.")

export class Api extends Definition
  .annotate(OpenApi.Transform, (spec) => documentCredentials(Definition, collapseIdenticalAnyOf(spec) as OpenApi.OpenAPISpec)) {}
