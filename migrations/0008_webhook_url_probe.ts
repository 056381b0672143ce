import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * Per-endpoint probing (webhooks/Deliveries.ts): a failed attempt holds back, and a recovered one
 * releases, the other subscriptions owing something to the same webhook URL in one statement each. This
 * index finds them without scanning every subscription; it holds only the rows with work, like
 * `subscriptions_due`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE INDEX subscriptions_url_owing ON subscriptions (webhook_url)
      WHERE webhook_url IS NOT NULL AND status = 'active' AND pending_through > delivered_through`
})
