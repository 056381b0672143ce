import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { OperatorAuth } from "../api/Auth.js"
import { DeterminationBody } from "../domain/Determination.js"
import { InvalidPublicId, Unauthorized, ValidationFailed } from "../domain/Problem.js"

export const IngestResultSchema = Schema.Struct({
  outcome: Schema.Literals(["created", "updated", "unchanged"]),
  public_id: Schema.String,
  determination_id: Schema.String,
  determination_digest: Schema.String,
  version: Schema.Int,
  changed_fields: Schema.Array(Schema.String)
}).annotate({ identifier: "IngestResult" })

export class DeterminationsApi extends HttpApiGroup.make("determinations")
  .add(
    HttpApiEndpoint.put("put", "/determinations/:publicId", {
      params: { publicId: Schema.String },
      payload: DeterminationBody,
      success: [IngestResultSchema.pipe(HttpApiSchema.status(200)), IngestResultSchema.pipe(HttpApiSchema.status(201))],
      error: [InvalidPublicId, Unauthorized, ValidationFailed]
    })
      // Unknown fields are refused (422), and every problem of the body is reported at once.
      .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "all" })
      .annotate(OpenApi.Summary, "Store a determination")
      .annotate(OpenApi.Description,
        "201 when the determination is new, 200 when a new version was stored or the body equals the current version (outcome unchanged). Unknown fields are refused with 422.")
  )
  .middleware(OperatorAuth)
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "Determinations (operator)") {}
