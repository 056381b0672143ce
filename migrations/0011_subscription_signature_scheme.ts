import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * Asymmetric webhook signatures (docs/API.md §10.5, Standard Webhooks `v1a`): a webhook subscription signs
 * with its own secret (`v1`, HMAC-SHA256) or with the service's Ed25519 webhook key (`v1a`, no secret).
 * So a webhook subscription has a secret exactly when its scheme is `v1`; a pull subscription never has one
 * (its scheme stays the default and means nothing). This replaces 0006's `subscriptions_check`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE subscriptions
      ADD COLUMN signature_scheme text NOT NULL DEFAULT 'v1' CHECK (signature_scheme IN ('v1', 'v1a')),
      DROP CONSTRAINT subscriptions_check,
      ADD CONSTRAINT subscriptions_secret_by_scheme
        CHECK ((secret IS NOT NULL) = (webhook_url IS NOT NULL AND signature_scheme = 'v1'))`
})
