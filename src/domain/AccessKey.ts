import { Schema } from "effect"
import { Scope } from "./ApiKey.js"
import { NonEmptyText, Timestamp } from "./Json.js"

export const TenantId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, { message: () => "must be 1-128 characters of A-Z a-z 0-9 . _ : -" }),
  Schema.annotations({ identifier: "TenantId" })
)

/** The stored key record without its secret or hash: what operators see. */
export const ApiKeyView = Schema.Struct({
  key_id: Schema.String,
  key_prefix: Schema.String,
  tenant_id: Schema.String,
  name: Schema.String,
  scopes: Schema.Array(Scope),
  rate_limit_per_minute: Schema.Int,
  daily_quota: Schema.Int,
  created_at: Schema.String,
  expires_at: Schema.NullOr(Schema.String),
  revoked_at: Schema.NullOr(Schema.String),
  last_used_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "ApiKey" })
export type ApiKeyView = typeof ApiKeyView.Type

export interface ApiKeyRecord extends ApiKeyView {
  readonly key_hash: string
}

export const CreateApiKeyRequest = Schema.Struct({
  tenant_id: TenantId,
  name: NonEmptyText.pipe(Schema.maxLength(200)),
  // minItems rather than NonEmptyArray: an empty list is reported at /scopes, not at a missing /scopes/0.
  scopes: Schema.Array(Scope).pipe(
    Schema.minItems(1, { message: () => "must name at least one scope" }),
    Schema.filter((scopes) => new Set(scopes).size === scopes.length || "must not repeat a scope")
  ),
  rate_limit_per_minute: Schema.optional(Schema.Int.pipe(Schema.between(1, 1_000_000))),
  daily_quota: Schema.optional(Schema.Int.pipe(Schema.between(1, 1_000_000_000))),
  expires_at: Schema.optional(Timestamp)
}).annotations({
  identifier: "CreateApiKeyRequest",
  parseOptions: { onExcessProperty: "error" },
  examples: [{ tenant_id: "demo", name: "laptop", scopes: ["trust:read", "receipt:write", "receipt:read", "mcp:call"] }]
})
export type CreateApiKeyRequest = typeof CreateApiKeyRequest.Type

export const CreatedApiKey = Schema.Struct({
  key_id: Schema.String,
  api_key: Schema.String.annotations({ description: "The plaintext key. Shown once: only its SHA-256 is stored." }),
  key_prefix: Schema.String,
  tenant_id: Schema.String,
  name: Schema.String,
  scopes: Schema.Array(Scope),
  rate_limit_per_minute: Schema.Int,
  daily_quota: Schema.Int,
  created_at: Schema.String,
  expires_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "CreatedApiKey" })
export type CreatedApiKey = typeof CreatedApiKey.Type

export const ApiKeyList = Schema.Struct({ keys: Schema.Array(ApiKeyView) }).annotations({ identifier: "ApiKeyList" })

export const DefaultRateLimitPerMinute = 600
export const DefaultDailyQuota = 100_000
