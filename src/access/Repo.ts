import { PgClient } from "@effect/sql-pg"
import { Effect, Option } from "effect"
import type { Scope } from "../domain/ApiKey.js"
import type { ApiKeyRecord } from "../domain/AccessKey.js"

interface KeyRow {
  readonly key_id: string
  readonly tenant_id: string
  readonly name: string
  readonly key_hash: string
  readonly key_prefix: string
  readonly scopes: ReadonlyArray<Scope>
  readonly rate_limit_per_minute: number
  readonly daily_quota: number
  readonly created_at: Date
  readonly expires_at: Date | null
  readonly revoked_at: Date | null
  readonly last_used_at: Date | null
}

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

/** API-key records by hash: the only place keys touch SQL. The plaintext never arrives here. */
export class KeyStore extends Effect.Service<KeyStore>()("pv/KeyStore", {
  effect: Effect.gen(function*() {
    const sql = yield* PgClient.PgClient

    const findByHash = (keyHash: string) =>
      sql<KeyRow>`SELECT * FROM api_keys WHERE key_hash = ${keyHash}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRecord))
      )

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
      } as any)}`.pipe(Effect.asVoid)

    const list = (tenantId: Option.Option<string>) =>
      Option.match(tenantId, {
        onNone: () => sql<KeyRow>`SELECT * FROM api_keys ORDER BY created_at, key_id`,
        onSome: (tenant) => sql<KeyRow>`SELECT * FROM api_keys WHERE tenant_id = ${tenant} ORDER BY created_at, key_id`
      }).pipe(Effect.map((rows) => rows.map(toRecord)))

    /** Revokes once; a second revoke keeps the first time. Returns the hash so caches can drop it. */
    const revoke = (keyId: string, at: Date) =>
      sql<{ key_hash: string }>`
        UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ${at}) WHERE key_id = ${keyId}
        RETURNING key_hash`.pipe(Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (r) => r.key_hash)))

    const touch = (keyIds: ReadonlyArray<string>, at: Date) =>
      keyIds.length === 0
        ? Effect.void
        : sql`UPDATE api_keys SET last_used_at = ${at} WHERE key_id IN ${sql.in(keyIds)}`.pipe(Effect.asVoid)

    return { findByHash, insert, list, revoke, touch } as const
  })
}) {}
