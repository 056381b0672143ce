import { Schema } from "effect"
import { Scope } from "./ApiKey.js"
import { NonEmptyText, Timestamp } from "./Json.js"

export const TenantId = Schema.String.check(
  Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/u, { message: "must be 1-128 characters of A-Z a-z 0-9 . _ : -" })
).annotate({ identifier: "TenantId" })

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
}).annotate({ identifier: "ApiKey" })
export type ApiKeyView = typeof ApiKeyView.Type

export interface ApiKeyRecord extends ApiKeyView {
  readonly key_hash: string
}

export const CreateApiKeyRequest = Schema.Struct({
  tenant_id: TenantId,
  name: NonEmptyText.check(Schema.isMaxLength(200)),
  // minItems rather than NonEmptyArray: an empty list is reported at /scopes, not at a missing /scopes/0.
  scopes: Schema.Array(Scope).check(
    Schema.isMinLength(1, { message: "must name at least one scope" }),
    Schema.makeFilter((scopes: ReadonlyArray<string>) => new Set(scopes).size === scopes.length || "must not repeat a scope")
  ),
  rate_limit_per_minute: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000 }))),
  daily_quota: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000_000 }))),
  expires_at: Schema.optionalKey(Timestamp)
}).annotate({
  identifier: "CreateApiKeyRequest",
  // Excess members are refused by the decoder's options ({ onExcessProperty: "error" } at the decode call
  // or HttpApi.PayloadParseOptions): Effect 4 ignores a parseOptions annotation.
  examples: [{ tenant_id: "demo", name: "laptop", scopes: ["trust:read", "receipt:write", "receipt:read", "mcp:call"] }]
})
export type CreateApiKeyRequest = typeof CreateApiKeyRequest.Type

/** What a key's creation answers: the view's members without revocation and use, and the key itself, once. */
const { key_id, revoked_at: _revoked, last_used_at: _used, ...createdMembers } = ApiKeyView.fields
export const CreatedApiKey = Schema.Struct({
  key_id,
  api_key: Schema.String.annotate({ description: "The plaintext key. Shown once: only its SHA-256 is stored." }),
  ...createdMembers
}).annotate({ identifier: "CreatedApiKey" })
export type CreatedApiKey = typeof CreatedApiKey.Type

export const ApiKeyList = Schema.Struct({ keys: Schema.Array(ApiKeyView) }).annotate({ identifier: "ApiKeyList" })

export const DefaultRateLimitPerMinute = 600
export const DefaultDailyQuota = 100_000
