import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { ApiKeyAuth, RequiredScope } from "../api/Auth.js"
import { MachineTrustResponse } from "../domain/MachineTrust.js"
import { DeterminationNotFound, InvalidPublicId, RateLimited, Unavailable } from "../domain/Problem.js"

// The id is checked by the handler (requirePublicId), so a malformed one is the 400 invalid-public-id of docs/API.md §2.
const TrustPath = { publicId: Schema.String.annotate({ description: "DET-V1-* or QUAL-V1-*" }) }
const ConditionalHeaders = { "if-none-match": Schema.optionalKey(Schema.String) }

export class TrustApi extends HttpApiGroup.make("trust")
  .add(
    HttpApiEndpoint.get("machine", "/trust/:publicId/machine", {
      params: TrustPath,
      headers: ConditionalHeaders,
      success: MachineTrustResponse,
      error: [InvalidPublicId, DeterminationNotFound]
    })
      .middleware(ApiKeyAuth)
      .annotate(RequiredScope, "trust:read")
      .annotate(OpenApi.Summary, "Resolve a determination")
      .annotate(OpenApi.Description,
        "The canonical pv.machine-trust.v1 document. `ETag` is the quoted trust_state_digest; a matching `If-None-Match` answers 304. " +
        "A successful resolution is not permission to rely: check freshness.state, lifecycle.state and authority first.")
  )
  .add(
    HttpApiEndpoint.get("human", "/trust/:publicId/human", {
      params: TrustPath,
      headers: ConditionalHeaders,
      success: MachineTrustResponse,
      error: [InvalidPublicId, DeterminationNotFound, RateLimited, Unavailable]
    })
      .annotate(OpenApi.Summary, "Resolve a determination for a browser (no key, limited per client address)")
      .annotate(OpenApi.Description, "The identical canonical document the machine endpoint returns, for browser-side proxies.")
  )
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "Trust resolution") {}
