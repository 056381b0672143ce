import { PgClient } from "@effect/sql-pg"
import { Array as Arr, Context, Effect, Layer, Option, Schema, SchemaTransformation } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { Hash } from "./Merkle.js"
import type { TileHash } from "./Growth.js"
import * as Rows from "../platform/Rows.js"

/** What the log records an entry for; with `ref` (receipt_id or event_id) it names the entry. */
export type EntryKind = "receipt" | "event"

export interface StoredCheckpoint {
  readonly size: number
  readonly root: Hash
  readonly note: string
}

/** A range of one tile level: hashes `first` .. `stop - 1` (level 0: the leaf hashes). */
export interface HashRange {
  readonly level: number
  readonly first: number
  readonly stop: number
}

export interface LogRepoShape {
  /** Inside the caller's transaction: one pending entry (an event's; receipts enqueue in their batch insert). */
  readonly enqueue: (kind: EntryKind, ref: string, entry: Uint8Array) => Effect.Effect<void, SqlError>
  /** Inside a transaction: true when this transaction now holds the integration lock. */
  readonly tryLockIntegration: Effect.Effect<boolean, SqlError>
  readonly latestCheckpoint: Effect.Effect<Option.Option<StoredCheckpoint>, SqlError>
  /** How many entries are integrated (the index after the last one). */
  readonly integratedSize: Effect.Effect<number, SqlError>
  /**
   * Outside any transaction: the latest checkpoint's size when no entry is pending (nothing to integrate), else
   * undefined (entries wait, or there is no checkpoint yet). One cheap statement: no lock, no tiles.
   */
  readonly idleSize: Effect.Effect<number | undefined, SqlError>
  /** Under the integration lock: moves up to `limit` pending entries to indexes `size`, `size + 1`, …; their leaf hashes in index order. */
  readonly movePending: (size: number, limit: number) => Effect.Effect<Array<{ index: number; leaf: Hash }>, SqlError>
  readonly insertTileHashes: (hashes: ReadonlyArray<TileHash>) => Effect.Effect<void, SqlError>
  readonly insertCheckpoint: (checkpoint: StoredCheckpoint, at: Date) => Effect.Effect<void, SqlError>
  readonly resignCheckpoint: (checkpoint: StoredCheckpoint) => Effect.Effect<void, SqlError>
  /** Hashes of several ranges in one round trip. */
  readonly readHashes: (ranges: ReadonlyArray<HashRange>) => Effect.Effect<Array<{ level: number; index: number; hash: Hash }>, SqlError>
  /** Entry bytes of indexes first .. stop - 1, in index order. */
  readonly readEntries: (first: number, stop: number) => Effect.Effect<Array<Uint8Array>, SqlError>
  /** The index of a receipt's or event's entry, once integrated. */
  readonly indexOf: (kind: EntryKind, ref: string) => Effect.Effect<Option.Option<number>, SqlError>
  readonly withTransaction: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
}

/** Only the instance holding this (transaction-scoped) advisory lock integrates: "pvlog" in ASCII. */
export const IntegrationLockKey = 0x70766c6f67

/**
 * An int8 column as a number. The driver decodes int8 to a bigint (which JSON.stringify refuses and
 * which does not mix with number arithmetic); every log size and index is a safe integer, so it is
 * converted here, once, and a value beyond 2^53 fails the row instead of losing precision.
 */
const Int8 = Schema.Union([Schema.BigInt, Schema.Number]).pipe(
  Schema.decodeTo(Schema.Int, SchemaTransformation.transform({ decode: (n) => Number(n), encode: (n) => BigInt(n) }))
)

const Bytes = Schema.Uint8Array

const LockRow = Schema.Struct({ locked: Schema.Boolean })
const CheckpointRow = Schema.Struct({ tree_size: Int8, root_hash: Bytes, note: Schema.String })
const SizeRow = Schema.Struct({ size: Int8 })
const IdleRow = Schema.Struct({ pending: Schema.Boolean, size: Schema.NullOr(Int8) })
const MovedRow = Schema.Struct({ idx: Int8, leaf_hash: Bytes })
const HashRow = Schema.Struct({ level: Schema.Int, idx: Int8, hash: Bytes })
const EntryRow = Schema.Struct({ entry: Bytes })
const IndexRow = Schema.Struct({ idx: Int8 })

const HashRangeRequest = Schema.Struct({ level: Schema.Number, first: Schema.Number, stop: Schema.Number })

const makeLogRepo = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient

  /** Inside the caller's transaction: one pending entry (an event's; receipts enqueue in their batch insert). */
  const enqueue = (kind: EntryKind, ref: string, entry: Uint8Array) =>
    sql`INSERT INTO log_pending (kind, ref, entry) VALUES (${kind}, ${ref}, ${entry})`.pipe(Effect.asVoid)

  /** Inside a transaction: true when this transaction now holds the integration lock. */
  const tryLockIntegration = Rows.all(LockRow, sql`SELECT pg_try_advisory_xact_lock(${BigInt(IntegrationLockKey)}) AS locked`).pipe(
    Effect.map((rows) => rows[0]?.locked === true)
  )

  const latestCheckpoint = Rows.all(CheckpointRow, sql`SELECT tree_size, root_hash, note FROM log_checkpoints ORDER BY tree_size DESC LIMIT 1`).pipe(
    Effect.map((rows) =>
      Option.map(Option.fromUndefinedOr(rows[0]), (row): StoredCheckpoint => ({ size: row.tree_size, root: row.root_hash, note: row.note })))
  )

  /** How many entries are integrated (the index after the last one). */
  const integratedSize = Rows.all(SizeRow, sql`SELECT coalesce(max(idx) + 1, 0)::bigint AS size FROM log_entries`).pipe(
    Effect.map((rows) => rows[0]?.size ?? 0)
  )

  const idleSize = Rows.all(
    IdleRow,
    sql`SELECT EXISTS (SELECT 1 FROM log_pending) AS pending, (SELECT max(tree_size) FROM log_checkpoints)::bigint AS size`
  ).pipe(Effect.map((rows) => (rows[0] === undefined || rows[0].pending || rows[0].size === null ? undefined : rows[0].size)))

  /**
   * Under the integration lock: moves up to `limit` pending entries, oldest first, to indexes
   * `size`, `size + 1`, … in one statement (deleted from pending exactly as they are inserted), with
   * their RFC 9162 leaf hashes SHA-256(0x00 ‖ entry). Returns the new leaf hashes in index order.
   */
  const moved = Rows.findAll({
    Request: Schema.Struct({ size: Schema.Number, limit: Schema.Number }),
    Result: MovedRow,
    execute: ({ size, limit }) => sql`
      WITH moved AS (
        DELETE FROM log_pending
        WHERE id IN (SELECT id FROM log_pending ORDER BY id LIMIT ${limit})
        RETURNING id, kind, ref, entry
      )
      INSERT INTO log_entries (idx, kind, ref, entry, leaf_hash)
      SELECT ${BigInt(size)}::bigint + row_number() OVER (ORDER BY id) - 1, kind, ref, entry, sha256('\\x00'::bytea || entry)
      FROM moved
      RETURNING idx, leaf_hash`
  })
  const movePending = (size: number, limit: number) =>
    Effect.map(moved({ size, limit }), (rows) => rows.map((row) => ({ index: row.idx, leaf: row.leaf_hash as Hash })).sort((a, b) => a.index - b.index))

  const insertTileHashes = (hashes: ReadonlyArray<TileHash>) => {
    const rows = hashes.map((h) => ({ level: h.level, idx: BigInt(h.index), hash: h.hash }))
    return Arr.isArrayNonEmpty(rows) ? sql`INSERT INTO log_tile_hashes ${sql.insert(rows)}`.pipe(Effect.asVoid) : Effect.void
  }

  const insertCheckpoint = (checkpoint: StoredCheckpoint, at: Date) =>
    sql`
      INSERT INTO log_checkpoints (tree_size, root_hash, note, created_at)
      VALUES (${BigInt(checkpoint.size)}, ${checkpoint.root}, ${checkpoint.note}, ${at})`.pipe(Effect.asVoid)

  /** The same tree under a new key (PV_LOG_SIGNING_KEY or PV_LOG_ORIGIN changed): only the note changes. */
  const resignCheckpoint = (checkpoint: StoredCheckpoint) =>
    sql`
      UPDATE log_checkpoints SET note = ${checkpoint.note}
      WHERE tree_size = ${BigInt(checkpoint.size)} AND root_hash = ${checkpoint.root}`.pipe(Effect.asVoid)

  /**
   * Hashes of several ranges in one round trip: each range is one tile (or the part of one a proof needs).
   * Bounds go as bigint arrays (one element type: the driver infers an array's type from its elements).
   */
  const hashes = Rows.findAll({
    Request: Schema.Array(HashRangeRequest),
    Result: HashRow,
    execute: (ranges) => sql`
        SELECT r.level, t.idx, t.hash
        FROM unnest(${ranges.map((r) => r.level)}::int[], ${ranges.map((r) => BigInt(r.first))}::bigint[], ${ranges.map((r) => BigInt(r.stop))}::bigint[])
          AS r(level, first, stop)
        CROSS JOIN LATERAL (
          SELECT idx, leaf_hash AS hash FROM log_entries WHERE r.level = 0 AND idx >= r.first AND idx < r.stop
          UNION ALL
          SELECT idx, hash FROM log_tile_hashes WHERE r.level > 0 AND level = r.level AND idx >= r.first AND idx < r.stop
        ) t`
  })
  const readHashes = (ranges: ReadonlyArray<HashRange>) =>
    ranges.length === 0
      ? Effect.succeed([])
      : Effect.map(hashes(ranges), (rows) => rows.map((row) => ({ level: row.level, index: row.idx, hash: row.hash as Hash })))

  /** Entry bytes of indexes first .. stop - 1, in index order. */
  const entries = Rows.findAll({
    Request: Schema.Struct({ first: Schema.Number, stop: Schema.Number }),
    Result: EntryRow,
    execute: ({ first, stop }) => sql`SELECT entry FROM log_entries WHERE idx >= ${BigInt(first)} AND idx < ${BigInt(stop)} ORDER BY idx`
  })
  const readEntries = (first: number, stop: number) => Effect.map(entries({ first, stop }), (rows) => rows.map((row) => row.entry))

  /** The index of a receipt's or event's entry, once integrated. */
  const index = Rows.findOneOption({
    Request: Schema.Struct({ kind: Schema.String, ref: Schema.String }),
    Result: IndexRow,
    execute: ({ kind, ref }) => sql`SELECT idx FROM log_entries WHERE kind = ${kind} AND ref = ${ref}`
  })
  const indexOf = (kind: EntryKind, ref: string) => Effect.map(index({ kind, ref }), Option.map((row) => row.idx))

  return {
    enqueue: Effect.fn("LogRepo.enqueue")(enqueue),
    tryLockIntegration: Effect.withSpan(tryLockIntegration, "LogRepo.tryLockIntegration"),
    latestCheckpoint: Effect.withSpan(latestCheckpoint, "LogRepo.latestCheckpoint"),
    integratedSize: Effect.withSpan(integratedSize, "LogRepo.integratedSize"),
    idleSize: Effect.withSpan(idleSize, "LogRepo.idleSize"),
    movePending: Effect.fn("LogRepo.movePending")(movePending),
    insertTileHashes: Effect.fn("LogRepo.insertTileHashes")(insertTileHashes),
    insertCheckpoint: Effect.fn("LogRepo.insertCheckpoint")(insertCheckpoint),
    resignCheckpoint: Effect.fn("LogRepo.resignCheckpoint")(resignCheckpoint),
    readHashes: Effect.fn("LogRepo.readHashes")(readHashes),
    readEntries: Effect.fn("LogRepo.readEntries")(readEntries),
    indexOf: Effect.fn("LogRepo.indexOf")(indexOf),
    // The SQL client's own combinator, which opens its own span (sql.transaction).
    withTransaction: sql.withTransaction
  } satisfies LogRepoShape
})

/**
 * SQL for the transparency log: pending entries, integrated entries, tile hashes and checkpoints.
 * Integrated rows are only ever inserted; nothing here updates or deletes them. Every row is decoded
 * with its schema; int8 columns (sizes, indexes) come back as numbers.
 */
export class LogRepo extends Context.Service<LogRepo, LogRepoShape>()("pv/LogRepo", { make: makeLogRepo }) {
  static readonly layer = Layer.effect(this, makeLogRepo)
}
