import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/** API keys (hash only), determinations with every stored version, and their evidence. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE api_keys (
      key_id text PRIMARY KEY,
      tenant_id text NOT NULL,
      name text NOT NULL,
      key_hash text NOT NULL UNIQUE,
      key_prefix text NOT NULL,
      scopes text[] NOT NULL,
      rate_limit_per_minute integer NOT NULL CHECK (rate_limit_per_minute > 0),
      daily_quota integer NOT NULL CHECK (daily_quota > 0),
      created_at timestamptz NOT NULL,
      expires_at timestamptz,
      revoked_at timestamptz,
      last_used_at timestamptz
    )`
  yield* sql`CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at)`
  yield* sql`
    CREATE TABLE determinations (
      public_id text PRIMARY KEY,
      subject_id text NOT NULL,
      current_version_id text,
      current_version integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX determinations_subject ON determinations (subject_id)`
  yield* sql`
    CREATE TABLE determination_versions (
      determination_id text PRIMARY KEY,
      public_id text NOT NULL REFERENCES determinations (public_id),
      version integer NOT NULL,
      body jsonb NOT NULL,
      determination_digest text NOT NULL,
      evidence_digest text NOT NULL,
      tier text NOT NULL,
      lifecycle_state text NOT NULL,
      as_of timestamptz NOT NULL,
      valid_until timestamptz NOT NULL,
      recorded_at timestamptz NOT NULL,
      UNIQUE (public_id, version)
    )`
  yield* sql`
    CREATE TABLE evidence (
      determination_id text NOT NULL REFERENCES determination_versions (determination_id),
      evidence_id text NOT NULL,
      kind text NOT NULL,
      digest text NOT NULL,
      collected_at timestamptz NOT NULL,
      source text NOT NULL,
      PRIMARY KEY (determination_id, evidence_id)
    )`
  yield* sql`CREATE INDEX evidence_digest ON evidence (digest)`
})
