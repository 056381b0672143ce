import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { OperatorAuth } from "../access/Auth.js"
import { DeterminationBody } from "../domain/Determination.js"
import { InvalidPublicId, Unauthorized, ValidationFailed } from "../domain/Problem.js"

export const IngestResultSchema = Schema.Struct({
  outcome: Schema.Literal("created", "updated", "unchanged"),
  public_id: Schema.String,
  determination_id: Schema.String,
  determination_digest: Schema.String,
  version: Schema.Int,
  changed_fields: Schema.Array(Schema.String)
}).annotations({ identifier: "IngestResult" })

export class DeterminationsApi extends HttpApiGroup.make("determinations")
  .add(
    HttpApiEndpoint.put("put", "/determinations/:publicId")
      .setPath(Schema.Struct({ publicId: Schema.String }))
      .setPayload(DeterminationBody.annotations({ parseOptions: { onExcessProperty: "error", errors: "all" } }))
      .addSuccess(IngestResultSchema.annotations(HttpApiSchema.annotations({ status: 200 })))
      .addSuccess(IngestResultSchema.annotations(HttpApiSchema.annotations({ status: 201 })))
      .addError(InvalidPublicId)
      .addError(Unauthorized)
      .addError(ValidationFailed)
      .annotate(OpenApi.Summary, "Store a determination (operator)")
      .annotate(OpenApi.Description,
        "201 when the determination is new, 200 when a new version was stored or the body equals the current version (outcome unchanged). Unknown fields are refused with 422.")
  )
  .middleware(OperatorAuth)
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "Determinations (operator)") {}
