import { HttpApi, OpenApi } from "@effect/platform"
import { ApiKeysApi } from "../access/Api.js"
import { DeterminationsApi } from "../trust/DeterminationsApi.js"
import { TrustApi } from "../trust/Api.js"
import { ReceiptsApi } from "../receipts/Api.js"
import { EventsApi } from "../events/Api.js"
import { McpApi } from "../mcp/Api.js"
import { LogApi } from "../log/Api.js"
import { SystemApi } from "./SystemApi.js"
import { problemJsonSpec } from "./OpenApiSpec.js"

/** The whole REST surface; OpenAPI is generated from this one definition. */
export class Api extends HttpApi.make("pv-trust")
  .add(SystemApi)
  .add(TrustApi)
  .add(DeterminationsApi)
  .add(ApiKeysApi)
  .add(ReceiptsApi)
  .add(McpApi)
  .add(EventsApi)
  .add(LogApi)
  .annotate(OpenApi.Title, "Trust Resolution and Reliance Receipt Service")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description,
    "Resolves determinations (DET-V1-*, QUAL-V1-*) into canonical pv.machine-trust.v1 documents. " +
    "Credential issuance is NOT_AUTHORIZED: no response implies an issued credential. Errors are RFC 9457 problem+json.")
  .annotate(OpenApi.Transform, problemJsonSpec) {}
