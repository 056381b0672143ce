import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * Per-origin probing (webhooks/Deliveries.ts, docs/API.md §10.5). A receiver is an origin (scheme, host,
 * port): a failure that is the receiver's (no connection, reset, TLS, time-out, 5xx, 429) holds back the
 * other subscriptions owing something to the same origin behind one probe, which rotates among them.
 *
 * - `webhook_origin` is derived from `webhook_url` by the database itself (a stored generated column), so
 *   every row has it, the rows already stored included, and no writer can get it wrong. `webhook_url` is
 *   stored as the URL parser's `href` (lower-case scheme and host, default port left out), so the text up to
 *   the path is `new URL(webhook_url).origin`.
 * - `retry_at`: when the subscription's own backoff lets it try again after its own last failed attempt
 *   (NULL once it is delivered). A hold may push `next_attempt_at` later; a release never brings it before
 *   `retry_at`, so a subscription that fails alone keeps its own backoff.
 * - `held_step`: the backoff step of the group probe this row waits behind, or is (NULL: not held).
 * - The index finds an origin's rows with work, like `subscriptions_url_owing` (0008) a URL's.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE subscriptions
      ADD COLUMN webhook_origin text GENERATED ALWAYS AS (substring(webhook_url FROM '^[a-z][a-z0-9+.-]*://[^/?#]*')) STORED,
      ADD COLUMN retry_at timestamptz,
      ADD COLUMN held_step integer`
  // Rows failing now: their next attempt is the best record of their own backoff.
  yield* sql`UPDATE subscriptions SET retry_at = next_attempt_at WHERE attempts > 0`
  yield* sql`
    CREATE INDEX subscriptions_origin_owing ON subscriptions (webhook_origin)
      WHERE webhook_url IS NOT NULL AND status = 'active' AND pending_through > delivered_through`
})
