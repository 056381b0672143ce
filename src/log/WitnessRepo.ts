import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema, SchemaTransformation } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { StoredCheckpoint } from "./Repo.js"

const Int8 = Schema.Union([Schema.BigInt, Schema.Number]).pipe(
  Schema.decodeTo(Schema.Int, SchemaTransformation.transform({ decode: (n) => Number(n), encode: (n) => BigInt(n) }))
)

const LeaseRow = Schema.Struct({
  cosigned_size: Schema.NullOr(Int8),
  stored: Schema.Boolean,
  tree_size: Schema.NullOr(Int8),
  root_hash: Schema.NullOr(Schema.Uint8Array),
  note: Schema.NullOr(Schema.String)
})
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

/** This instance's turn at a witness, as its lease row and the rows beside it tell it. */
export interface WitnessLease {
  /** The size the witness last cosigned, as far as any instance learned (null: never asked). */
  readonly cosignedSize: number | null
  /** Whether its cosignature of that size is stored. */
  readonly stored: boolean
  /** The checkpoint it should join: the largest another configured witness cosigned above that size. */
  readonly joinable: Option.Option<StoredCheckpoint>
}

/** How long a witness's lease lasts: well past one submission's time-out, so a live holder keeps it. */
export const WitnessLeaseSeconds = 15

/** SQL of the log's witnessing (see `WitnessRepo`); every method is one statement. */
export interface WitnessRepoShape {
  /** Takes the witness's lease (or finds it held); the held size and the checkpoint to submit come back with it. */
  readonly lease: (witness: string, token: string, witnesses: ReadonlyArray<string>, atMost: number) => Effect.Effect<Option.Option<WitnessLease>, SqlError>
  /** Gives the lease back, kept until the interval from the submission's start has passed. */
  readonly release: (witness: string, token: string, intervalMs?: number) => Effect.Effect<void, SqlError>
  /**
   * On stop: every lease this instance (`token`) still holds ends within `intervalMs` (the cadence kept, the
   * 15 s meant for a holder that died mid-turn not waited out by the next instance).
   */
  readonly releaseAll: (token: string, intervalMs: number) => Effect.Effect<void, SqlError>
  readonly recordAnswer: (witness: string, token: string, answer: { readonly status: number; readonly text: string; readonly cosignedSize?: number }) => Effect.Effect<void, SqlError>
  /** The cosignature, the witness's new size, its answer and the release, in one statement. */
  readonly storeCosignature: (witness: string, token: string, size: number, line: string, cosignedAt: Date, intervalMs: number) => Effect.Effect<void, SqlError>
  readonly joinableAbove: (witnesses: ReadonlyArray<string>, size: number, atMost: number) => Effect.Effect<Option.Option<StoredCheckpoint>, SqlError>
  readonly hasCosignature: (witness: string, size: number) => Effect.Effect<boolean, SqlError>
  /** The newest checkpoint cosigned by at least `quorum` of `witnesses`, not below `floor`. */
  readonly newestWitnessed: (witnesses: ReadonlyArray<string>, quorum: number, floor: number) => Effect.Effect<Option.Option<WitnessedCheckpoint>, SqlError>
}

const makeWitnessRepo = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient

  /**
   * This instance's turn at `witness`, if no other instance holds a live lease (or it is ours): the
   * size that witness last cosigned, as far as any instance learned (null: never asked), whether its
   * cosignature of that size is stored, and the checkpoint it should join (as `joinableAbove` finds it
   * above that size, up to `atMost`). One statement. Times are the database's, so instances with skewed
   * clocks agree. A lease given back after a submission stays ours until the interval after the
   * submission's start has passed (`release`, `storeCosignature`): another instance waits that long.
   */
  const lease = (witness: string, token: string, witnesses: ReadonlyArray<string>, atMost: number) =>
    sql`
      WITH leased AS (
        INSERT INTO log_witnesses AS w (witness, lease_token, lease_until)
        VALUES (${witness}, ${token}, now() + make_interval(secs => ${WitnessLeaseSeconds}))
        ON CONFLICT (witness) DO UPDATE SET lease_token = excluded.lease_token, lease_until = excluded.lease_until
        WHERE w.lease_until IS NULL OR w.lease_until < now() OR w.lease_token = excluded.lease_token
        RETURNING cosigned_size,
          EXISTS (SELECT 1 FROM log_cosignatures c WHERE c.witness = w.witness AND c.tree_size = w.cosigned_size) AS stored
      )
      SELECT l.cosigned_size, l.stored, c.tree_size, c.root_hash, c.note
      FROM leased l LEFT JOIN log_checkpoints c ON c.tree_size = (
        SELECT max(s.tree_size) FROM log_cosignatures s
        WHERE s.witness = ANY(${witnesses}::text[]) AND s.tree_size > coalesce(l.cosigned_size, 0) AND s.tree_size <= ${BigInt(atMost)}
      )`.pipe(
      Effect.flatMap(leaseRows),
      Effect.map((found) =>
        Option.map(Option.fromUndefinedOr(found[0]), (row): WitnessLease => ({
          cosignedSize: row.cosigned_size,
          stored: row.stored,
          joinable: row.tree_size === null || row.root_hash === null || row.note === null
            ? Option.none<StoredCheckpoint>()
            : Option.some<StoredCheckpoint>({ size: row.tree_size, root: row.root_hash, note: row.note })
        }))
      )
    )

  /**
   * The lease's end after a submission that started `intervalMs` before the next may (the lease was
   * taken right before it): ours until then, so no other instance submits to this witness sooner.
   */
  const heldAfterSubmission = (intervalMs: number) =>
    sql`lease_until - make_interval(secs => ${WitnessLeaseSeconds}) + make_interval(secs => ${intervalMs / 1000})`

  /**
   * The end of a turn. Without a submission, the lease is given back: another instance may take the next
   * turn at once; after one (`intervalMs`), it is kept until the interval from the submission's start.
   */
  const release = (witness: string, token: string, intervalMs?: number) =>
    (intervalMs === undefined
      ? sql`UPDATE log_witnesses SET lease_token = NULL, lease_until = NULL WHERE witness = ${witness} AND lease_token = ${token}`
      : sql`UPDATE log_witnesses SET lease_until = ${heldAfterSubmission(intervalMs)} WHERE witness = ${witness} AND lease_token = ${token}`).pipe(
      Effect.asVoid
    )

  const releaseAll = (token: string, intervalMs: number) =>
    sql`
      UPDATE log_witnesses SET lease_until = LEAST(lease_until, now() + make_interval(secs => ${intervalMs / 1000}))
      WHERE lease_token = ${token}`.pipe(Effect.asVoid)

  /** Under our lease: the witness's answer, and the size it holds when the answer told it. */
  const recordAnswer = (witness: string, token: string, answer: { readonly status: number; readonly text: string; readonly cosignedSize?: number }) =>
    sql`
      UPDATE log_witnesses SET
        last_status = ${answer.status}, last_answer = ${answer.text.slice(0, 500)}, last_answer_at = now(),
        cosigned_size = coalesce(${answer.cosignedSize === undefined ? null : BigInt(answer.cosignedSize)}::bigint, cosigned_size)
      WHERE witness = ${witness} AND lease_token = ${token}`.pipe(Effect.asVoid)

  /**
   * A verified cosignature of the checkpoint of `size`, that witness's new size and the end of the turn
   * (the lease kept only until `intervalMs` after the submission's start, as `release` does), in one
   * statement (so atomically).
   */
  const storeCosignature = (witness: string, token: string, size: number, line: string, cosignedAt: Date, intervalMs: number) =>
    sql`
      WITH stored AS (
        INSERT INTO log_cosignatures (tree_size, witness, line, cosigned_at) VALUES (${BigInt(size)}, ${witness}, ${line}, ${cosignedAt})
        ON CONFLICT (tree_size, witness) DO UPDATE SET line = excluded.line, cosigned_at = excluded.cosigned_at
        RETURNING tree_size
      )
      UPDATE log_witnesses SET
        last_status = 200, last_answer = ${line.slice(0, 500)}, last_answer_at = now(),
        cosigned_size = (SELECT tree_size FROM stored), lease_until = ${heldAfterSubmission(intervalMs)}
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

  return {
    lease: Effect.fn("WitnessRepo.lease")(lease),
    release: Effect.fn("WitnessRepo.release")(release),
    releaseAll: Effect.fn("WitnessRepo.releaseAll")(releaseAll),
    recordAnswer: Effect.fn("WitnessRepo.recordAnswer")(recordAnswer),
    storeCosignature: Effect.fn("WitnessRepo.storeCosignature")(storeCosignature),
    joinableAbove: Effect.fn("WitnessRepo.joinableAbove")(joinableAbove),
    hasCosignature: Effect.fn("WitnessRepo.hasCosignature")(hasCosignature),
    newestWitnessed: Effect.fn("WitnessRepo.newestWitnessed")(newestWitnessed)
  } satisfies WitnessRepoShape
})

/**
 * SQL of the log's witnessing (migration 0007): a lease per witness so one instance at a time submits
 * to it, what each witness answered and last cosigned, and the stored cosignatures.
 */
export class WitnessRepo extends Context.Service<WitnessRepo, WitnessRepoShape>()("pv/WitnessRepo", { make: makeWitnessRepo }) {
  static readonly layer = Layer.effect(this, makeWitnessRepo)
}
