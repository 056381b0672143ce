import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ApiKeyList, CreateApiKeyRequest, CreatedApiKey } from "../domain/AccessKey.js"
import { NotFound, Unauthorized, ValidationFailed } from "../domain/Problem.js"
import { OperatorAuth } from "./Auth.js"

export class ApiKeysApi extends HttpApiGroup.make("apiKeys")
  .add(
    HttpApiEndpoint.post("create", "/api-keys")
      .setPayload(CreateApiKeyRequest.annotations({ parseOptions: { onExcessProperty: "error", errors: "all" } }))
      .addSuccess(CreatedApiKey, { status: 201 })
      .addError(ValidationFailed)
      .annotate(OpenApi.Summary, "Provision an API key (operator)")
      .annotate(OpenApi.Description, "The plaintext `api_key` is in this response only; the service keeps its SHA-256.")
  )
  .add(
    HttpApiEndpoint.get("list", "/api-keys")
      .setUrlParams(Schema.Struct({ tenant_id: Schema.optional(Schema.String) }))
      .addSuccess(ApiKeyList)
      .annotate(OpenApi.Summary, "List API keys (operator)")
      .annotate(OpenApi.Description, "Every key (of one tenant with `tenant_id`), with scopes, limits and dates; never the key or its hash.")
  )
  .add(
    HttpApiEndpoint.del("revoke", "/api-keys/:keyId")
      .setPath(Schema.Struct({ keyId: Schema.String }))
      .addSuccess(HttpApiSchema.NoContent)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Revoke an API key (operator)")
      .annotate(OpenApi.Description, "Takes effect on every instance within 2 seconds.")
  )
  .addError(Unauthorized)
  .middleware(OperatorAuth)
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "API keys (operator)") {}
