import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * The entry bytes (UTF-8 of RFC 8785 JCS) of rows stored before this migration, computed in SQL:
 * members in JCS order, and `to_json(text)` escapes strings exactly as JCS does (\b \f \n \r \t,
 * \" \\, other controls as lowercase \u00xx, everything else literal). Exported so a test can compare
 * this recipe with the service's (src/log/Entries.ts).
 */
export const receiptEntrySql = `convert_to(
  '{"created_at":' || to_json(receipt->>'created_at')::text ||
  ',"receipt_digest":' || to_json(receipt_digest)::text ||
  ',"receipt_id":' || to_json(receipt_id)::text ||
  ',"type":"pv.log.receipt.v1"}', 'UTF8')`

export const eventEntrySql = `convert_to(
  '{"eventHash":' || to_json(event_hash)::text ||
  ',"public_id":' || to_json(public_id)::text ||
  ',"sequence":' || sequence::text ||
  ',"type":"pv.log.event.v1"}', 'UTF8')`

/**
 * The transparency log (docs/API.md §11). A receipt or event write adds one `log_pending` row in
 * its own transaction; the integrator moves pending rows into `log_entries` (gapless indexes, never
 * updated or deleted), stores the complete-subtree hashes of tile levels 1, 2, … (level 0 is the
 * leaf hashes), and signs a checkpoint, all in one transaction. Receipts and events stored before
 * this migration are enqueued in the order they were created, and their receipts queued for the
 * one-time signature backfill (src/receipts/Receipts.ts).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE log_pending (
      id bigserial PRIMARY KEY,
      kind text NOT NULL CHECK (kind IN ('receipt', 'event')),
      ref text NOT NULL,
      entry bytea NOT NULL,
      UNIQUE (kind, ref)
    )`
  yield* sql`
    CREATE TABLE log_entries (
      idx bigint PRIMARY KEY CHECK (idx >= 0),
      kind text NOT NULL CHECK (kind IN ('receipt', 'event')),
      ref text NOT NULL,
      entry bytea NOT NULL,
      leaf_hash bytea NOT NULL CHECK (length(leaf_hash) = 32),
      UNIQUE (kind, ref)
    )`
  yield* sql`
    CREATE TABLE log_tile_hashes (
      level integer NOT NULL CHECK (level >= 1),
      idx bigint NOT NULL CHECK (idx >= 0),
      hash bytea NOT NULL CHECK (length(hash) = 32),
      PRIMARY KEY (level, idx)
    )`
  yield* sql`
    CREATE TABLE log_checkpoints (
      tree_size bigint PRIMARY KEY CHECK (tree_size >= 0),
      root_hash bytea NOT NULL CHECK (length(root_hash) = 32),
      note text NOT NULL,
      created_at timestamptz NOT NULL
    )`
  yield* sql`CREATE TABLE receipt_signature_backfill (receipt_id text PRIMARY KEY)`
  yield* sql`INSERT INTO receipt_signature_backfill (receipt_id) SELECT receipt_id FROM reliance_receipts`
  yield* sql.unsafe(`
    INSERT INTO log_pending (kind, ref, entry)
    SELECT kind, ref, entry FROM (
      SELECT 'receipt' AS kind, receipt_id AS ref, created_at AS at, NULL::text AS public_id, NULL::integer AS sequence,
        ${receiptEntrySql} AS entry
      FROM reliance_receipts
      UNION ALL
      SELECT 'event', event_id, occurred_at, public_id, sequence, ${eventEntrySql}
      FROM events
    ) existing
    ORDER BY at, kind, public_id, sequence, ref`)
})
