import { PgClient } from "@effect/sql-pg"
import { Array as Arr, Context, Deferred, Effect, Exit, Layer, Option, Queue, Schema } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { ReceiptSignature, RelianceReceipt, SealedReceipt } from "../domain/Receipt.js"
import { entryBytesOf, receiptEntryOf } from "../log/Entries.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"
import * as Rows from "../platform/Rows.js"

/** A receipt as stored: every receipt written since the transparency log is signed; older ones until the backfill reaches them. */
export type StoredReceipt = SealedReceipt & { readonly signature?: ReceiptSignature }

export interface StoredOutcome {
  readonly receipt: StoredReceipt
  /** True when this call stored the receipt; false when the idempotency key already held one. */
  readonly created: boolean
}

export interface ReceiptsRepoShape {
  /** `json`: the receipt's JSON text as it is to be stored (JSON.stringify(receipt)). */
  readonly insertOrFetch: (receipt: RelianceReceipt, json?: string) => Effect.Effect<StoredOutcome, SqlError>
  /** A receipt of this tenant only: another tenant's id reads as absent. */
  readonly find: (tenantId: string, receiptId: string) => Effect.Effect<Option.Option<StoredReceipt>, SqlError>
  readonly storeSignatures: (signed: ReadonlyArray<RelianceReceipt>) => Effect.Effect<Array<StoredReceipt>, SqlError>
  readonly unsignedBatch: (limit: number) => Effect.Effect<Array<StoredReceipt>, SqlError>
  readonly dropOrphanedBackfill: Effect.Effect<void, SqlError>
}

interface Pending {
  readonly receipt: RelianceReceipt
  /** JSON.stringify(receipt), made by the caller (which answers with the same text). */
  readonly json: string
  readonly done: Deferred.Deferred<StoredOutcome, SqlError>
}

/**
 * A receipt as stored (json, written once from a sealed receipt, never changed but for its signature), so
 * its shape is checked only: decoding every field again would cost a full parse per read.
 */
const StoredReceiptJson = Schema.declare((u: unknown): u is StoredReceipt => typeof u === "object" && u !== null && !Array.isArray(u))
const ReceiptRow = Schema.Struct({ receipt: StoredReceiptJson })
const InsertedRow = Schema.Struct({ receipt_id: Schema.String })

// The group insert's parameters are the batch itself: its answer is decoded without encoding them (platform/Rows.ts).
const insertedRows = Rows.batchRows(InsertedRow)

/** Receipts written together in one statement (and one commit). */
const MaxBatch = 64

const row = ({ receipt: r, json }: Pick<Pending, "receipt" | "json">) => ({
  receipt_id: r.receipt_id,
  tenant_id: r.tenant_id,
  principal: r.principal,
  subject_public_id: r.subject_public_id,
  purpose_id: r.purpose_id,
  requested_action: r.requested_action,
  determination_digest: r.determination_digest,
  determination_id: r.determination_id,
  decision: r.decision,
  receipt_digest: r.receipt_digest,
  // json (not jsonb) keeps the text exactly as written, key order included.
  receipt: json,
  created_at: new Date(r.created_at)
})

const make = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient
  const mode = yield* DatabaseMode
  const { logEnabled } = yield* AppConfig

  /** The receipt holding an idempotency key (its six columns). */
  const receiptByKey = Rows.findOneOption({
    Request: Schema.Struct({
      tenant_id: Schema.String,
      principal: Schema.String,
      subject_public_id: Schema.String,
      purpose_id: Schema.String,
      requested_action: Schema.String,
      determination_digest: Schema.String
    }),
    Result: ReceiptRow,
    execute: (r) => sql`
      SELECT receipt FROM reliance_receipts
      WHERE tenant_id = ${r.tenant_id} AND principal = ${r.principal}
        AND subject_public_id = ${r.subject_public_id} AND purpose_id = ${r.purpose_id}
        AND requested_action = ${r.requested_action} AND determination_digest = ${r.determination_digest}`
  })

  const existing = (r: RelianceReceipt): Effect.Effect<StoredOutcome, SqlError> =>
    receiptByKey(r).pipe(
      Effect.flatMap((row) =>
        Option.isNone(row)
          ? Effect.die(new Error("idempotency key conflicted but no receipt holds it"))
          : Effect.succeed({ receipt: row.value.receipt, created: false } satisfies StoredOutcome))
    )

  /** One statement for the whole batch; the outcome of each receipt, in order. */
  const insertBatch = (batch: Arr.NonEmptyReadonlyArray<Pick<Pending, "receipt" | "json">>) =>
    Effect.gen(function*() {
      const rows = Arr.map(batch, row)
      const receipts = Arr.map(batch, (p) => p.receipt)
      const inserted = yield* insertedRows(logEnabled
        ? sql`
          WITH inserted AS (
            INSERT INTO reliance_receipts ${sql.insert(rows)}
            ON CONFLICT (tenant_id, principal, subject_public_id, purpose_id, requested_action, determination_digest)
            DO NOTHING
            RETURNING receipt_id
          ), enqueued AS (
            INSERT INTO log_pending (kind, ref, entry)
            SELECT 'receipt', e.ref, e.entry
            FROM unnest(${receipts.map((r) => r.receipt_id)}::text[], ${receipts.map((r) => entryBytesOf(receiptEntryOf(r)))}::bytea[]) AS e(ref, entry)
            JOIN inserted ON inserted.receipt_id = e.ref
          )
          SELECT receipt_id FROM inserted`
        : sql`
          INSERT INTO reliance_receipts ${sql.insert(rows)}
          ON CONFLICT (tenant_id, principal, subject_public_id, purpose_id, requested_action, determination_digest)
          DO NOTHING
          RETURNING receipt_id`)
      const stored = new Set(inserted.map((r) => r.receipt_id))
      return yield* Effect.forEach(receipts, (receipt): Effect.Effect<StoredOutcome, SqlError> =>
        stored.has(receipt.receipt_id) ? Effect.succeed({ receipt, created: true }) : existing(receipt))
    })

  /** Answers every caller of a batch; if the batch failed as a whole, each receipt is written alone. */
  const settle = (batch: Arr.NonEmptyReadonlyArray<Pending>): Effect.Effect<void> =>
    Effect.flatMap(Effect.exit(insertBatch(batch)), (exit) => {
      if (Exit.isSuccess(exit)) {
        return Effect.forEach(batch, (p, i) => Deferred.succeed(p.done, exit.value[i]!), { discard: true })
      }
      if (batch.length === 1) return Deferred.done(batch[0]!.done, Exit.map(exit, (outcomes) => outcomes[0]!)).pipe(Effect.asVoid)
      return Effect.forEach(batch, (p) =>
        Effect.flatMap(Effect.exit(insertBatch([p])), (alone) =>
          Deferred.done(p.done, Exit.map(alone, (outcomes) => outcomes[0]!))), { discard: true })
    })

  const queue = yield* Queue.unbounded<Pending>()
  // The embedded database has one connection; PostgreSQL gets a few writers so batches overlap.
  const writers = mode.kind === "embedded" ? 1 : 4
  for (let i = 0; i < writers; i++) {
    yield* Queue.takeBetween(queue, 1, MaxBatch).pipe(
      // takeBetween waits for at least one: a batch is never empty.
      Effect.flatMap((chunk) => Arr.isReadonlyArrayNonEmpty(chunk) ? settle(chunk) : Effect.void),
      Effect.forever,
      Effect.forkScoped
    )
  }

  /** `json`: the receipt's JSON text as it is to be stored (JSON.stringify(receipt)). */
  const insertOrFetch = (receipt: RelianceReceipt, json: string = JSON.stringify(receipt)): Effect.Effect<StoredOutcome, SqlError> =>
    Effect.gen(function*() {
      const done = yield* Deferred.make<StoredOutcome, SqlError>()
      yield* Queue.offer(queue, { receipt, json, done })
      return yield* Deferred.await(done)
    })

  const receiptById = Rows.findOneOption({
    Request: Schema.Struct({ tenantId: Schema.String, receiptId: Schema.String }),
    Result: ReceiptRow,
    execute: ({ tenantId, receiptId }) => sql`
      SELECT receipt FROM reliance_receipts WHERE receipt_id = ${receiptId} AND tenant_id = ${tenantId}`
  })
  /** A receipt of this tenant only: another tenant's id reads as absent. */
  const find = (tenantId: string, receiptId: string) => Effect.map(receiptById({ tenantId, receiptId }), Option.map((r) => r.receipt))

  const receiptsByIds = Rows.findAll({
    Request: Schema.Array(Schema.String),
    Result: ReceiptRow,
    execute: (ids) => sql`SELECT receipt FROM reliance_receipts WHERE receipt_id = ANY(${ids}::text[])`
  })

  const unsignedRows = Rows.findAll({
    Request: Schema.Number,
    Result: ReceiptRow,
    execute: (limit) => sql`
      SELECT r.receipt FROM receipt_signature_backfill b JOIN reliance_receipts r USING (receipt_id)
      ORDER BY b.receipt_id LIMIT ${limit}`
  })

  /**
   * Adds signatures to receipts stored without one (the only update a receipt ever gets), unless one
   * is there already (another instance got there first), and takes them off the backfill queue.
   * Returns each receipt as stored afterwards.
   */
  const storeSignatures = (signed: ReadonlyArray<RelianceReceipt>) =>
    sql.withTransaction(Effect.gen(function*() {
      const ids = signed.map((r) => r.receipt_id)
      yield* sql`
        UPDATE reliance_receipts AS r SET receipt = s.receipt::json
        FROM unnest(${ids}::text[], ${signed.map((r) => JSON.stringify(r))}::text[]) AS s(receipt_id, receipt)
        WHERE r.receipt_id = s.receipt_id AND (r.receipt -> 'signature') IS NULL`
      yield* sql`DELETE FROM receipt_signature_backfill WHERE receipt_id = ANY(${ids}::text[])`
      return yield* receiptsByIds(ids)
    })).pipe(Effect.map((rows) => rows.map((row) => row.receipt)))

  /** The next receipts the migration queued for the signature backfill (instances racing on one batch store one signature). */
  const unsignedBatch = (limit: number) => unsignedRows(limit).pipe(Effect.map((rows) => rows.map((row) => row.receipt)))

  /** Queue entries whose receipt is gone (never expected: receipts are not deleted) would block the loop. */
  const dropOrphanedBackfill = sql`
    DELETE FROM receipt_signature_backfill b
    WHERE NOT EXISTS (SELECT 1 FROM reliance_receipts r WHERE r.receipt_id = b.receipt_id)`.pipe(Effect.asVoid)

  return {
    // create, replay and read are per-request paths: no span of their own (docs/PERFORMANCE.md).
    insertOrFetch,
    find,
    storeSignatures: Effect.fn("ReceiptsRepo.storeSignatures")(storeSignatures),
    unsignedBatch: Effect.fn("ReceiptsRepo.unsignedBatch")(unsignedBatch),
    dropOrphanedBackfill: Effect.withSpan(dropOrphanedBackfill, "ReceiptsRepo.dropOrphanedBackfill")
  } satisfies ReceiptsRepoShape
})

/**
 * SQL for reliance receipts. Rows are inserted once and never updated.
 *
 * Inserts are coalesced: receipts that arrive while a write is in flight go into the next multi-row
 * `INSERT … ON CONFLICT DO NOTHING RETURNING`, one statement and one commit for the batch (group commit),
 * and no caller is answered before its row is committed. The unique constraint still decides idempotency:
 * a row not returned lost to an existing receipt (or to an identical one earlier in the same batch), which a
 * following SELECT (a new snapshot under READ COMMITTED) then reads. A batch that fails is retried row by
 * row, so one bad row never fails the others.
 *
 * With the transparency log on (PV_LOG_ENABLED), the same statement also enqueues one log entry per
 * receipt it actually inserted (a CTE joined on the inserted ids), so a receipt and its pending entry
 * commit together or not at all.
 */
export class ReceiptsRepo extends Context.Service<ReceiptsRepo, ReceiptsRepoShape>()("pv/ReceiptsRepo", { make }) {
  static readonly layer = Layer.effect(ReceiptsRepo, make)
}
