import { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * Witnessing (docs/API.md, "Witnesses"). Two sides share one migration, as both are this package:
 *
 * - `witness_checkpoints`: what `pv witness serve` holds per log origin, the latest checkpoint it
 *   cosigned (size, root, and the note as cosigned: the log's verified signature lines and the
 *   witness's own line, served to monitors). A new checkpoint is stored only by a conditional upsert
 *   that matches the size and root the submission was checked against, so a size never rolls back.
 * - `log_witnesses`: the service's view of each configured witness (by its verifier key): the size it
 *   last cosigned (learned from a 200 or a 409), its last answer, and a lease, so that one instance
 *   at a time submits to a witness and submissions to it are serialized across every instance.
 * - `log_cosignatures`: one valid cosignature line per (checkpoint, witness); /log/checkpoint serves the
 *   newest checkpoint with a quorum of them.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE witness_checkpoints (
      origin text PRIMARY KEY,
      tree_size bigint NOT NULL CHECK (tree_size >= 0),
      root_hash bytea NOT NULL CHECK (length(root_hash) = 32),
      note text NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  yield* sql`
    CREATE TABLE log_witnesses (
      witness text PRIMARY KEY,
      cosigned_size bigint CHECK (cosigned_size >= 0),
      lease_token text,
      lease_until timestamptz,
      last_status integer,
      last_answer text,
      last_answer_at timestamptz
    )`
  yield* sql`
    CREATE TABLE log_cosignatures (
      tree_size bigint NOT NULL REFERENCES log_checkpoints (tree_size),
      witness text NOT NULL,
      line text NOT NULL,
      cosigned_at timestamptz NOT NULL,
      PRIMARY KEY (tree_size, witness)
    )`
  yield* sql`CREATE INDEX log_cosignatures_newest ON log_cosignatures (tree_size DESC)`
})
