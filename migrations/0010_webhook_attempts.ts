import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * Webhook attempts you can see, and redelivery (docs/API.md §10.5, contract §14).
 *
 * - `webhook_attempts`: one row per attempt, written by the delivery worker right after the statement that
 *   records the attempt's outcome (webhooks/Deliveries.ts). Deleted with its subscription (the foreign key); the
 *   newest 100 per subscription are kept, older ones pruned by a background loop (webhooks/Attempts.ts).
 *   `attempt_id` is `att_` + ULID stamped at the attempt's start, so it orders a subscription's attempts and
 *   is the page cursor; the index serves both the page and the prune.
 * - `subscriptions.redeliver_from`: a redelivery asked for while an attempt is in flight, applied (lowering
 *   `delivered_through` to `redeliver_from - 1`) when that attempt's outcome is recorded; never set on a row
 *   that no attempt holds, where a redelivery applies at once. One whose worker died before recording the
 *   outcome is applied by the prune loop's repair, found on the partial index.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE webhook_attempts (
      attempt_id text PRIMARY KEY,
      subscription_id text NOT NULL REFERENCES subscriptions (subscription_id) ON DELETE CASCADE,
      event_id text NOT NULL,
      sequence integer NOT NULL,
      started_at timestamptz NOT NULL,
      duration_ms integer NOT NULL CHECK (duration_ms >= 0),
      status integer,
      outcome text NOT NULL CHECK (outcome IN ('delivered', 'failed', 'timeout', 'refused')),
      error text
    )`
  yield* sql`CREATE INDEX webhook_attempts_newest ON webhook_attempts (subscription_id, attempt_id DESC)`
  yield* sql`ALTER TABLE subscriptions ADD COLUMN redeliver_from integer CHECK (redeliver_from >= 1)`
  yield* sql`CREATE INDEX subscriptions_redeliver_pending ON subscriptions (subscription_id) WHERE redeliver_from IS NOT NULL`
})
