import { HttpApi, OpenApi } from "effect/http-api"
import { ApiKeysApi } from "../access/Api.js"
import { EventsApi } from "../events/Api.js"
import { SubscriptionsApi } from "../events/SubscriptionsApi.js"
import { LogApi, RootLogApi } from "../log/Api.js"
import { McpApi } from "../mcp/Api.js"
import { ReceiptsApi } from "../receipts/Api.js"
import { DeterminationsApi } from "../trust/DeterminationsApi.js"
import { TrustApi } from "../trust/Api.js"
import { RequestGuard } from "./Guard.js"
import { SystemApi } from "./SystemApi.js"

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

/**
 * The whole REST surface; OpenAPI is generated from this one definition. Errors are the domain's problem
 * classes (src/domain/Problem.ts), which HttpApi itself renders as application/problem+json and documents;
 * `RequestGuard` adds the answers every operation can give (400/413/415/422/500/503). Request bodies are
 * decoded strictly: an unknown member is an error, and every failing member is reported.
 */
export class Api extends HttpApi.make("pv-trust")
  .add(SystemApi)
  .add(TrustApi)
  .add(DeterminationsApi)
  .add(ApiKeysApi)
  .add(ReceiptsApi)
  .add(McpApi)
  .add(EventsApi)
  .add(SubscriptionsApi)
  .add(LogApi)
  .add(RootLogApi)
  .middleware(RequestGuard)
  .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "all" })
  .annotate(OpenApi.Title, "Trust Resolution and Reliance Receipt Service")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description,
    "Resolves determinations (DET-V1-*, QUAL-V1-*) into canonical pv.machine-trust.v1 documents. " +
    "Credential issuance is NOT_AUTHORIZED: no response implies an issued credential. Errors are RFC 9457 problem+json.")
  .annotate(OpenApi.Transform, (spec) => collapseIdenticalAnyOf(spec) as typeof spec) {}
