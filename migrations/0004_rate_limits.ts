import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * Shared rate-limit counters for deployments on PostgreSQL without Redis. UNLOGGED: no WAL and no fsync,
 * so counting a request is not a durable write; after a crash the counters start again from zero.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE UNLOGGED TABLE rate_limit_counters (
      key text PRIMARY KEY,
      count bigint NOT NULL,
      expires_at_ms bigint NOT NULL
    )`
  yield* sql`CREATE INDEX rate_limit_counters_expiry ON rate_limit_counters (expires_at_ms)`
})
