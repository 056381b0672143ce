import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { ApiKeyList, CreateApiKeyRequest, CreatedApiKey } from "../domain/ApiKeyRecord.js"
import { NotFound, ValidationFailed } from "../domain/Problem.js"
import { OperatorAuth } from "../api/Auth.js"

// Unauthorized (401), RateLimited (429) and Unavailable (503) are OperatorAuth's errors, documented on every operation.
export class ApiKeysApi extends HttpApiGroup.make("apiKeys")
  .add(
    HttpApiEndpoint.post("create", "/api-keys", {
      payload: CreateApiKeyRequest,
      success: CreatedApiKey.pipe(HttpApiSchema.status(201)),
      error: ValidationFailed
    })
      .annotate(OpenApi.Summary, "Provision an API key")
      .annotate(OpenApi.Description, "The plaintext `api_key` is in this response only; the service keeps its SHA-256.")
  )
  .add(
    HttpApiEndpoint.get("list", "/api-keys", {
      query: { tenant_id: Schema.optionalKey(Schema.String) },
      success: ApiKeyList
    })
      .annotate(OpenApi.Summary, "List API keys")
      .annotate(OpenApi.Description, "Every key (of one tenant with `tenant_id`), with scopes, limits and dates; never the key or its hash.")
  )
  .add(
    HttpApiEndpoint.delete("revoke", "/api-keys/:keyId", {
      params: { keyId: Schema.String },
      success: HttpApiSchema.NoContent,
      error: NotFound
    })
      .annotate(OpenApi.Summary, "Revoke an API key")
      .annotate(OpenApi.Description, "Takes effect on every instance within 2 seconds.")
  )
  .middleware(OperatorAuth)
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "API keys (operator)") {}
