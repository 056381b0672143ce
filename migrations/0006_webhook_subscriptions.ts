import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * Push delivery (docs/API.md, "Subscriptions and webhooks"). A subscription row is also its delivery
 * outbox: the event append that must be delivered raises `pending_through` in the same transaction as the
 * event (the obligation commits with the event or not at all), and a delivery worker moves
 * `delivered_through` up one acknowledged event at a time. A subscription has work when
 * `pending_through > delivered_through`, it is active and `next_attempt_at` has passed; a worker claims it
 * with `FOR UPDATE SKIP LOCKED` and a lease (`lease_token`, `lease_until`), so one attempt at most is in
 * flight per subscription across every instance, and a dead instance's lease simply expires.
 *
 * Pull subscriptions (no `webhook_url`) keep their meaning; the old one-per-(key, determination) rule
 * becomes one per (key, determination, webhook URL).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE subscriptions
      ADD COLUMN webhook_url text,
      ADD COLUMN secret text,
      ADD COLUMN previous_secret text,
      ADD COLUMN previous_secret_until timestamptz,
      ADD COLUMN status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
      ADD COLUMN pending_through integer NOT NULL DEFAULT 0,
      ADD COLUMN delivered_through integer NOT NULL DEFAULT 0,
      ADD COLUMN attempts integer NOT NULL DEFAULT 0,
      ADD COLUMN failing_since timestamptz,
      ADD COLUMN last_attempt_at timestamptz,
      ADD COLUMN last_error text,
      ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now(),
      ADD COLUMN lease_token text,
      ADD COLUMN lease_until timestamptz,
      ADD CHECK ((webhook_url IS NULL) = (secret IS NULL))`
  yield* sql`UPDATE subscriptions SET pending_through = after_sequence, delivered_through = after_sequence`
  yield* sql`ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_key_id_public_id_key`
  yield* sql`CREATE UNIQUE INDEX subscriptions_key_target ON subscriptions (key_id, public_id, coalesce(webhook_url, ''))`
  // The append's outbox write: every webhook subscription of one chain.
  yield* sql`CREATE INDEX subscriptions_webhooks ON subscriptions (public_id) WHERE webhook_url IS NOT NULL`
  // The workers' claim: active webhook subscriptions with something to send, soonest first.
  yield* sql`
    CREATE INDEX subscriptions_due ON subscriptions (next_attempt_at)
      WHERE webhook_url IS NOT NULL AND status = 'active' AND pending_through > delivered_through`
})
