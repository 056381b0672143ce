import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ApiKeyAuth } from "../access/Auth.js"
import { MachineTrustResponse } from "../domain/MachineTrust.js"
import { DeterminationNotFound, InsufficientScope, InvalidPublicId, RateLimited, Unauthorized, Unavailable } from "../domain/Problem.js"

const TrustPath = Schema.Struct({
  publicId: Schema.String.annotations({ description: "DET-V1-* or QUAL-V1-*" })
})
const ConditionalHeaders = Schema.Struct({ "if-none-match": Schema.optional(Schema.String) })

export class TrustApi extends HttpApiGroup.make("trust")
  .add(
    HttpApiEndpoint.get("machine", "/trust/:publicId/machine")
      .setPath(TrustPath)
      .setHeaders(ConditionalHeaders)
      .addSuccess(MachineTrustResponse)
      .addError(InvalidPublicId)
      .addError(Unauthorized)
      .addError(InsufficientScope)
      .addError(DeterminationNotFound)
      .middleware(ApiKeyAuth)
      .annotate(OpenApi.Summary, "Resolve a determination (scope trust:read)")
      .annotate(OpenApi.Description,
        "The canonical pv.machine-trust.v1 document. `ETag` is the quoted trust_state_digest; a matching `If-None-Match` answers 304. " +
        "A successful resolution is not permission to rely: check freshness.state, lifecycle.state and authority first.")
  )
  .add(
    HttpApiEndpoint.get("human", "/trust/:publicId/human")
      .setPath(TrustPath)
      .setHeaders(ConditionalHeaders)
      .addSuccess(MachineTrustResponse)
      .addError(InvalidPublicId)
      .addError(DeterminationNotFound)
      .addError(RateLimited)
      .addError(Unavailable)
      .annotate(OpenApi.Summary, "Resolve a determination for a browser (no key, limited per client address)")
      .annotate(OpenApi.Description, "The identical canonical document the machine endpoint returns, for browser-side proxies.")
  )
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "Trust resolution") {}
