import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * Why a webhook subscription is `disabled` (docs/API.md §10.5): `gone` (its receiver answered 410 Gone) or
 * `failing` (attempts failed for PV_WEBHOOK_MAX_FAILURE_SECONDS); NULL while it is active. Before this
 * migration failing was the only way to be disabled, so the rows disabled now say so.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE subscriptions
      ADD COLUMN disabled_reason text CHECK (disabled_reason IN ('gone', 'failing'))`
  yield* sql`UPDATE subscriptions SET disabled_reason = 'failing' WHERE status = 'disabled'`
})
