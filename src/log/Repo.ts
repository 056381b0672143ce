import { PgClient } from "@effect/sql-pg"
import { Effect, Option } from "effect"
import type { Hash } from "./Merkle.js"
import type { TileHash } from "./Growth.js"

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

/** Only the instance holding this (transaction-scoped) advisory lock integrates: "pvlog" in ASCII. */
export const IntegrationLockKey = 0x70766c6f67

/** bigint columns arrive as decimal strings; every log size and index is a safe integer. */
const int = (value: string | number): number => Number(value)

/**
 * SQL for the transparency log: pending entries, integrated entries, tile hashes and checkpoints.
 * Integrated rows are only ever inserted; nothing here updates or deletes them.
 */
export class LogRepo extends Effect.Service<LogRepo>()("pv/LogRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* PgClient.PgClient

    /** Inside the caller's transaction: one pending entry (an event's; receipts enqueue in their batch insert). */
    const enqueue = (kind: EntryKind, ref: string, entry: Uint8Array) =>
      sql`INSERT INTO log_pending (kind, ref, entry) VALUES (${kind}, ${ref}, ${entry})`.pipe(Effect.asVoid)

    /** Inside a transaction: true when this transaction now holds the integration lock. */
    const tryLockIntegration = sql<{ locked: boolean }>`SELECT pg_try_advisory_xact_lock(${IntegrationLockKey}) AS locked`.pipe(
      Effect.map((rows) => rows[0]?.locked === true)
    )

    const latestCheckpoint = sql<{ tree_size: string; root_hash: Buffer; note: string }>`
      SELECT tree_size, root_hash, note FROM log_checkpoints ORDER BY tree_size DESC LIMIT 1`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row): StoredCheckpoint => ({ size: int(row.tree_size), root: row.root_hash, note: row.note })))
    )

    /** How many entries are integrated (the index after the last one). */
    const integratedSize = sql<{ size: string }>`SELECT coalesce(max(idx) + 1, 0) AS size FROM log_entries`.pipe(
      Effect.map((rows) => int(rows[0]?.size ?? 0))
    )

    /**
     * Under the integration lock: moves up to `limit` pending entries, oldest first, to indexes
     * `size`, `size + 1`, … in one statement (deleted from pending exactly as they are inserted), with
     * their RFC 9162 leaf hashes SHA-256(0x00 ‖ entry). Returns the new leaf hashes in index order.
     */
    const movePending = (size: number, limit: number) =>
      sql<{ idx: string; leaf_hash: Buffer }>`
        WITH moved AS (
          DELETE FROM log_pending
          WHERE id IN (SELECT id FROM log_pending ORDER BY id LIMIT ${limit})
          RETURNING id, kind, ref, entry
        )
        INSERT INTO log_entries (idx, kind, ref, entry, leaf_hash)
        SELECT ${size}::bigint + row_number() OVER (ORDER BY id) - 1, kind, ref, entry, sha256('\\x00'::bytea || entry)
        FROM moved
        RETURNING idx, leaf_hash`.pipe(
        Effect.map((rows) =>
          rows.map((row) => ({ index: int(row.idx), leaf: row.leaf_hash as Hash })).sort((a, b) => a.index - b.index))
      )

    const insertTileHashes = (hashes: ReadonlyArray<TileHash>) =>
      hashes.length === 0
        ? Effect.void
        : sql`INSERT INTO log_tile_hashes ${sql.insert(hashes.map((h) => ({ level: h.level, idx: h.index, hash: h.hash })))}`.pipe(Effect.asVoid)

    const insertCheckpoint = (checkpoint: StoredCheckpoint, at: Date) =>
      sql`
        INSERT INTO log_checkpoints (tree_size, root_hash, note, created_at)
        VALUES (${checkpoint.size}, ${checkpoint.root}, ${checkpoint.note}, ${at})`.pipe(Effect.asVoid)

    /** The same tree under a new key (PV_LOG_SIGNING_KEY or PV_LOG_ORIGIN changed): only the note changes. */
    const resignCheckpoint = (checkpoint: StoredCheckpoint) =>
      sql`
        UPDATE log_checkpoints SET note = ${checkpoint.note}
        WHERE tree_size = ${checkpoint.size} AND root_hash = ${checkpoint.root}`.pipe(Effect.asVoid)

    /** Hashes of several ranges in one round trip: each range is one tile (or the part of one a proof needs). */
    const readHashes = (ranges: ReadonlyArray<HashRange>) =>
      ranges.length === 0
        ? Effect.succeed([])
        : sql<{ level: number; idx: string; hash: Buffer }>`
          SELECT r.level, t.idx, t.hash
          FROM unnest(${ranges.map((r) => r.level)}::int[], ${ranges.map((r) => r.first)}::bigint[], ${ranges.map((r) => r.stop)}::bigint[])
            AS r(level, first, stop)
          CROSS JOIN LATERAL (
            SELECT idx, leaf_hash AS hash FROM log_entries WHERE r.level = 0 AND idx >= r.first AND idx < r.stop
            UNION ALL
            SELECT idx, hash FROM log_tile_hashes WHERE r.level > 0 AND level = r.level AND idx >= r.first AND idx < r.stop
          ) t`.pipe(Effect.map((rows) => rows.map((row) => ({ level: row.level, index: int(row.idx), hash: row.hash as Hash }))))

    /** Entry bytes of indexes first .. stop - 1, in index order. */
    const readEntries = (first: number, stop: number) =>
      sql<{ entry: Buffer }>`SELECT entry FROM log_entries WHERE idx >= ${first} AND idx < ${stop} ORDER BY idx`.pipe(
        Effect.map((rows) => rows.map((row) => row.entry as Uint8Array))
      )

    /** The index of a receipt's or event's entry, once integrated. */
    const indexOf = (kind: EntryKind, ref: string) =>
      sql<{ idx: string }>`SELECT idx FROM log_entries WHERE kind = ${kind} AND ref = ${ref}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => int(row.idx)))
      )

    return {
      enqueue,
      tryLockIntegration,
      latestCheckpoint,
      integratedSize,
      movePending,
      insertTileHashes,
      insertCheckpoint,
      resignCheckpoint,
      readHashes,
      readEntries,
      indexOf,
      withTransaction: sql.withTransaction
    } as const
  })
}) {}
