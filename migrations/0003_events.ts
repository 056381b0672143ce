import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * The signed event chain of each determination, the public keys that signed it, and subscriptions.
 * The head of each chain (sequence and hash) and the freshness state the chain last announced live on
 * the determinations row, which every writer already locks: that lock keeps sequences gapless and
 * lets several sweepers run without announcing a transition twice.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE determinations
      ADD COLUMN head_sequence integer NOT NULL DEFAULT 0 CHECK (head_sequence >= 0),
      ADD COLUMN head_hash text,
      ADD COLUMN freshness_announced text,
      ADD COLUMN freshness_due_at timestamptz`
  yield* sql`CREATE INDEX determinations_freshness_due ON determinations (freshness_due_at) WHERE freshness_due_at IS NOT NULL`
  yield* sql`
    CREATE TABLE event_signing_keys (
      kid text PRIMARY KEY,
      x text NOT NULL UNIQUE,
      created_at timestamptz NOT NULL
    )`
  yield* sql`
    CREATE TABLE events (
      public_id text NOT NULL REFERENCES determinations (public_id),
      sequence integer NOT NULL CHECK (sequence > 0),
      event_id text NOT NULL UNIQUE,
      type text NOT NULL,
      occurred_at timestamptz NOT NULL,
      payload jsonb NOT NULL,
      previous_event_hash text,
      event_hash text NOT NULL,
      kid text NOT NULL REFERENCES event_signing_keys (kid),
      sig text NOT NULL,
      PRIMARY KEY (public_id, sequence),
      CHECK ((sequence = 1) = (previous_event_hash IS NULL))
    )`
  yield* sql`
    CREATE TABLE subscriptions (
      subscription_id text PRIMARY KEY,
      tenant_id text NOT NULL,
      key_id text NOT NULL REFERENCES api_keys (key_id),
      public_id text NOT NULL REFERENCES determinations (public_id),
      after_sequence integer NOT NULL,
      created_at timestamptz NOT NULL,
      UNIQUE (key_id, public_id)
    )`
  yield* sql`CREATE INDEX subscriptions_tenant ON subscriptions (tenant_id, created_at)`
})
