import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * Reliance receipts. The full receipt JSON is stored as written (json keeps it byte for byte) and never
 * updated; the unique constraint is the idempotency key, so the database, not the application, decides
 * which of several concurrent identical requests stores the receipt.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE reliance_receipts (
      receipt_id text PRIMARY KEY,
      tenant_id text NOT NULL,
      principal text NOT NULL,
      subject_public_id text NOT NULL,
      purpose_id text NOT NULL,
      requested_action text NOT NULL,
      determination_digest text NOT NULL,
      determination_id text NOT NULL,
      decision text NOT NULL,
      receipt_digest text NOT NULL,
      receipt json NOT NULL,
      created_at timestamptz NOT NULL,
      CONSTRAINT reliance_receipts_idempotency_key
        UNIQUE (tenant_id, principal, subject_public_id, purpose_id, requested_action, determination_digest)
    )`
  yield* sql`CREATE INDEX reliance_receipts_subject ON reliance_receipts (subject_public_id, created_at)`
})
