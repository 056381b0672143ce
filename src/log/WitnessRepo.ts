import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema, SchemaTransformation } from "effect"
import type { StoredCheckpoint } from "./Repo.js"

const Int8 = Schema.Union([Schema.BigInt, Schema.Number]).pipe(
  Schema.decodeTo(Schema.Int, SchemaTransformation.transform({ decode: (n) => Number(n), encode: (n) => BigInt(n) }))
)

const LeaseRow = Schema.Struct({ cosigned_size: Schema.NullOr(Int8), stored: Schema.Boolean })
const SizeRow = Schema.Struct({ tree_size: Int8 })
const CheckpointRow = Schema.Struct({ tree_size: Int8, root_hash: Schema.Uint8Array, note: Schema.String })
const WitnessedRow = Schema.Struct({ tree_size: Int8, root_hash: Schema.Uint8Array, note: Schema.String, witness: Schema.String, line: Schema.String })

const rows = <S extends Schema.Codec<any, any, never, never>>(row: S) => {
  const decode = Schema.decodeUnknownEffect(Schema.Array(row))
  return (found: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<S["Type"]>> => Effect.orDie(decode(found))
}
const leaseRows = rows(LeaseRow)
const sizeRows = rows(SizeRow)
const checkpointRows = rows(CheckpointRow)
const witnessedRows = rows(WitnessedRow)

/** A checkpoint with the cosignature lines stored for it, by witness (its verifier key). */
export interface WitnessedCheckpoint extends StoredCheckpoint {
  readonly lines: ReadonlyArray<{ readonly witness: string; readonly line: string }>
}

/** How long a witness's lease lasts: well past one submission's time-out, so a live holder keeps it. */
export const WitnessLeaseSeconds = 15

const makeWitnessRepo = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient

  /**
   * This instance's turn at `witness`, if no other instance holds a live lease (or it is ours): the
   * size that witness last cosigned, as far as any instance learned (null: never asked), and whether its
   * cosignature of that size is stored. One statement. Times are the database's, so instances with skewed
   * clocks agree.
   */
  const lease = (witness: string, token: string) =>
    sql`
      INSERT INTO log_witnesses AS w (witness, lease_token, lease_until)
      VALUES (${witness}, ${token}, now() + make_interval(secs => ${WitnessLeaseSeconds}))
      ON CONFLICT (witness) DO UPDATE SET lease_token = excluded.lease_token, lease_until = excluded.lease_until
      WHERE w.lease_until IS NULL OR w.lease_until < now() OR w.lease_token = excluded.lease_token
      RETURNING cosigned_size,
        EXISTS (SELECT 1 FROM log_cosignatures c WHERE c.witness = w.witness AND c.tree_size = w.cosigned_size) AS stored`.pipe(
      Effect.flatMap(leaseRows),
      Effect.map((found) => Option.map(Option.fromUndefinedOr(found[0]), (row) => ({ cosignedSize: row.cosigned_size, stored: row.stored })))
    )

  /** The end of a turn: another instance may take the next one at once. */
  const release = (witness: string, token: string) =>
    sql`UPDATE log_witnesses SET lease_token = NULL, lease_until = NULL WHERE witness = ${witness} AND lease_token = ${token}`.pipe(Effect.asVoid)

  /** Under our lease: the witness's answer, and the size it holds when the answer told it. */
  const recordAnswer = (witness: string, token: string, answer: { readonly status: number; readonly text: string; readonly cosignedSize?: number }) =>
    sql`
      UPDATE log_witnesses SET
        last_status = ${answer.status}, last_answer = ${answer.text.slice(0, 500)}, last_answer_at = now(),
        cosigned_size = coalesce(${answer.cosignedSize === undefined ? null : BigInt(answer.cosignedSize)}::bigint, cosigned_size)
      WHERE witness = ${witness} AND lease_token = ${token}`.pipe(Effect.asVoid)

  /**
   * A verified cosignature of the checkpoint of `size`, that witness's new size and the end of the turn
   * (the lease given back), in one statement (so atomically).
   */
  const storeCosignature = (witness: string, token: string, size: number, line: string, cosignedAt: Date) =>
    sql`
      WITH stored AS (
        INSERT INTO log_cosignatures (tree_size, witness, line, cosigned_at) VALUES (${BigInt(size)}, ${witness}, ${line}, ${cosignedAt})
        ON CONFLICT (tree_size, witness) DO UPDATE SET line = excluded.line, cosigned_at = excluded.cosigned_at
        RETURNING tree_size
      )
      UPDATE log_witnesses SET
        last_status = 200, last_answer = ${line.slice(0, 500)}, last_answer_at = now(),
        cosigned_size = (SELECT tree_size FROM stored), lease_token = NULL, lease_until = NULL
      WHERE witness = ${witness} AND lease_token = ${token}`.pipe(Effect.asVoid)

  /**
   * The checkpoint of the largest size any of `witnesses` cosigned above `size`, up to `atMost`: the one a
   * witness that is behind should join.
   */
  const joinableAbove = (witnesses: ReadonlyArray<string>, size: number, atMost: number) =>
    sql`
      SELECT c.tree_size, c.root_hash, c.note FROM log_checkpoints c
      WHERE c.tree_size = (
        SELECT max(tree_size) FROM log_cosignatures
        WHERE witness = ANY(${witnesses}::text[]) AND tree_size > ${BigInt(size)} AND tree_size <= ${BigInt(atMost)}
      )`.pipe(
      Effect.flatMap(checkpointRows),
      Effect.map((found) => Option.map(Option.fromUndefinedOr(found[0]), (row): StoredCheckpoint => ({ size: row.tree_size, root: row.root_hash, note: row.note })))
    )

  /** Whether `witness`'s cosignature of the checkpoint of `size` is stored. */
  const hasCosignature = (witness: string, size: number) =>
    sql`SELECT tree_size FROM log_cosignatures WHERE tree_size = ${BigInt(size)} AND witness = ${witness}`.pipe(
      Effect.flatMap(sizeRows),
      Effect.map((found) => found.length > 0)
    )

  /**
   * The newest checkpoint of at least `floor` entries that `quorum` of `witnesses` cosigned, with their
   * lines. `floor` (the last one found) keeps the scan to the newest rows.
   */
  const newestWitnessed = (witnesses: ReadonlyArray<string>, quorum: number, floor: number) =>
    sql`
      WITH best AS (
        SELECT tree_size FROM log_cosignatures
        WHERE witness = ANY(${witnesses}::text[]) AND tree_size >= ${BigInt(floor)}
        GROUP BY tree_size HAVING count(*) >= ${quorum}
        ORDER BY tree_size DESC LIMIT 1
      )
      SELECT c.tree_size, c.root_hash, c.note, s.witness, s.line
      FROM best JOIN log_checkpoints c ON c.tree_size = best.tree_size
      JOIN log_cosignatures s ON s.tree_size = best.tree_size AND s.witness = ANY(${witnesses}::text[])`.pipe(
      Effect.flatMap(witnessedRows),
      Effect.map((found): Option.Option<WitnessedCheckpoint> => {
        const first = found[0]
        if (first === undefined) return Option.none()
        return Option.some({ size: first.tree_size, root: first.root_hash, note: first.note, lines: found.map((row) => ({ witness: row.witness, line: row.line })) })
      })
    )

  return { lease, release, recordAnswer, storeCosignature, joinableAbove, hasCosignature, newestWitnessed } as const
})

/**
 * SQL of the log's witnessing (migration 0007): a lease per witness so one instance at a time submits
 * to it, what each witness answered and last cosigned, and the stored cosignatures.
 */
export class WitnessRepo extends Context.Service<WitnessRepo, Effect.Success<typeof makeWitnessRepo>>()("pv/WitnessRepo", { make: makeWitnessRepo }) {
  static readonly layer = Layer.effect(this, makeWitnessRepo)
}
