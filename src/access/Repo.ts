import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlSchema } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { Scope } from "../domain/ApiKey.js"
import type { ApiKeyRecord } from "../domain/ApiKeyRecord.js"

/** A row of api_keys as the driver returns it (timestamptz → Date, text[] → array, integer → number). */
const KeyRow = Schema.Struct({
  key_id: Schema.String,
  tenant_id: Schema.String,
  name: Schema.String,
  key_hash: Schema.String,
  key_prefix: Schema.String,
  scopes: Schema.Array(Scope),
  rate_limit_per_minute: Schema.Number,
  daily_quota: Schema.Number,
  created_at: Schema.Date,
  expires_at: Schema.NullOr(Schema.Date),
  revoked_at: Schema.NullOr(Schema.Date),
  last_used_at: Schema.NullOr(Schema.Date)
})
type KeyRow = typeof KeyRow.Type

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString())

const toRecord = (row: KeyRow): ApiKeyRecord => ({
  key_id: row.key_id,
  tenant_id: row.tenant_id,
  name: row.name,
  key_hash: row.key_hash,
  key_prefix: row.key_prefix,
  scopes: row.scopes,
  rate_limit_per_minute: row.rate_limit_per_minute,
  daily_quota: row.daily_quota,
  created_at: row.created_at.toISOString(),
  expires_at: iso(row.expires_at),
  revoked_at: iso(row.revoked_at),
  last_used_at: iso(row.last_used_at)
})

/** The api_keys table (keys are found by the SHA-256 of the key; the key itself is never stored). */
export interface KeyStoreShape {
  readonly findByHash: (keyHash: string) => Effect.Effect<Option.Option<ApiKeyRecord>, Schema.SchemaError | SqlError>
  readonly insert: (record: ApiKeyRecord) => Effect.Effect<void, SqlError>
  /** Every key, or one tenant's. */
  readonly list: (tenantId: Option.Option<string>) => Effect.Effect<Array<ApiKeyRecord>, Schema.SchemaError | SqlError>
  /** Revokes the key; its hash when it was active. */
  readonly revoke: (keyId: string, at: Date) => Effect.Effect<Option.Option<string>, Schema.SchemaError | SqlError>
  /** Records the keys' last use. */
  readonly touch: (keyIds: ReadonlyArray<string>, at: Date) => Effect.Effect<void, SqlError>
}

const makeKeyStore = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient

  const byHash = SqlSchema.findOneOption({
    Request: Schema.String,
    Result: KeyRow,
    execute: (keyHash) => sql`SELECT * FROM api_keys WHERE key_hash = ${keyHash}`
  })
  const findByHash = (keyHash: string) => Effect.map(byHash(keyHash), Option.map(toRecord))

  const insert = (record: ApiKeyRecord) =>
    sql`INSERT INTO api_keys ${sql.insert({
      key_id: record.key_id,
      tenant_id: record.tenant_id,
      name: record.name,
      key_hash: record.key_hash,
      key_prefix: record.key_prefix,
      scopes: [...record.scopes],
      rate_limit_per_minute: record.rate_limit_per_minute,
      daily_quota: record.daily_quota,
      created_at: new Date(record.created_at),
      expires_at: record.expires_at === null ? null : new Date(record.expires_at)
    })}`.pipe(Effect.asVoid)

  const listAll = SqlSchema.findAll({
    Request: Schema.Void,
    Result: KeyRow,
    execute: () => sql`SELECT * FROM api_keys ORDER BY created_at, key_id`
  })
  const listTenant = SqlSchema.findAll({
    Request: Schema.String,
    Result: KeyRow,
    execute: (tenant) => sql`SELECT * FROM api_keys WHERE tenant_id = ${tenant} ORDER BY created_at, key_id`
  })
  const list = (tenantId: Option.Option<string>) =>
    Option.match(tenantId, { onNone: () => listAll(undefined), onSome: listTenant }).pipe(
      Effect.map((rows) => rows.map(toRecord))
    )

  /** Revokes once; a second revoke keeps the first time. Returns the hash so caches can drop it. */
  const revokeRow = SqlSchema.findOneOption({
    Request: Schema.Struct({ keyId: Schema.String, at: Schema.Date }),
    Result: Schema.Struct({ key_hash: Schema.String }),
    execute: ({ at, keyId }) => sql`
      UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ${at}) WHERE key_id = ${keyId}
      RETURNING key_hash`
  })
  const revoke = (keyId: string, at: Date) => Effect.map(revokeRow({ keyId, at }), Option.map((r) => r.key_hash))

  const touch = (keyIds: ReadonlyArray<string>, at: Date) =>
    keyIds.length === 0
      ? Effect.void
      : sql`UPDATE api_keys SET last_used_at = ${at} WHERE key_id IN ${sql.in(keyIds)}`.pipe(Effect.asVoid)

  return {
    findByHash: Effect.fn("KeyStore.findByHash")(findByHash),
    insert: Effect.fn("KeyStore.insert")(insert),
    list: Effect.fn("KeyStore.list")(list),
    revoke: Effect.fn("KeyStore.revoke")(revoke),
    touch: Effect.fn("KeyStore.touch")(touch)
  } satisfies KeyStoreShape
})

/** API-key records by hash: the only place keys touch SQL. The plaintext never arrives here. */
export class KeyStore extends Context.Service<KeyStore, KeyStoreShape>()("pv/KeyStore", {
  make: makeKeyStore
}) {
  /** Needs the database (PgClient), which the composition root provides. */
  static readonly layer = Layer.effect(this, this.make)
}
