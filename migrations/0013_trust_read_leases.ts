import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * Read your writes across instances (events/ChangeFeed.ts): one row per process that caches trust documents
 * (its lease and the highest fence it heard), and the sequence fences are numbered from. A writer, after its
 * commit, takes a fence and waits until every leased reader acked it. Rows of expired leases are deleted by
 * the renews of the others.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE trust_read_leases (
      reader_id text PRIMARY KEY,
      acked_fence bigint NOT NULL,
      lease_until timestamptz NOT NULL
    )`
  yield* sql`CREATE SEQUENCE trust_fence_seq`
})
