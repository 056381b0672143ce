import { PgClient } from "@effect/sql-pg"
import { Effect, Option } from "effect"
import type { RelianceReceipt } from "../domain/Receipt.js"

export interface StoredOutcome {
  readonly receipt: RelianceReceipt
  /** True when this call stored the receipt; false when the idempotency key already held one. */
  readonly created: boolean
}

/** SQL for reliance receipts. Rows are inserted once and never updated. */
export class ReceiptsRepo extends Effect.Service<ReceiptsRepo>()("pv/ReceiptsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* PgClient.PgClient

    /**
     * Insert-or-fetch on the idempotency key, enforced by the unique constraint. The INSERT is one
     * atomic statement (one round trip, committed when it answers); ON CONFLICT waits for a concurrent
     * insert of the same key to commit, and the following SELECT (a new snapshot under READ COMMITTED)
     * then sees that row: concurrent identical requests store exactly one receipt.
     */
    const insertOrFetch = (receipt: RelianceReceipt) =>
      Effect.gen(function*() {
        const inserted = yield* sql<{ receipt_id: string }>`
          INSERT INTO reliance_receipts
            (receipt_id, tenant_id, principal, subject_public_id, purpose_id, requested_action,
             determination_digest, determination_id, decision, receipt_digest, receipt, created_at)
          VALUES (${receipt.receipt_id}, ${receipt.tenant_id}, ${receipt.principal}, ${receipt.subject_public_id},
            ${receipt.purpose_id}, ${receipt.requested_action}, ${receipt.determination_digest},
            ${receipt.determination_id}, ${receipt.decision}, ${receipt.receipt_digest}, ${sql.json(receipt)},
            ${new Date(receipt.created_at)})
          ON CONFLICT (tenant_id, principal, subject_public_id, purpose_id, requested_action, determination_digest)
          DO NOTHING
          RETURNING receipt_id`
        if (inserted.length > 0) return { receipt, created: true } satisfies StoredOutcome
        const existing = yield* sql<{ receipt: RelianceReceipt }>`
          SELECT receipt FROM reliance_receipts
          WHERE tenant_id = ${receipt.tenant_id} AND principal = ${receipt.principal}
            AND subject_public_id = ${receipt.subject_public_id} AND purpose_id = ${receipt.purpose_id}
            AND requested_action = ${receipt.requested_action}
            AND determination_digest = ${receipt.determination_digest}`
        const row = existing[0]
        if (row === undefined) return yield* Effect.dieMessage("idempotency key conflicted but no receipt holds it")
        return { receipt: row.receipt, created: false } satisfies StoredOutcome
      })

    /** A receipt of this tenant only: another tenant's id reads as absent. */
    const find = (tenantId: string, receiptId: string) =>
      sql<{ receipt: RelianceReceipt }>`
        SELECT receipt FROM reliance_receipts WHERE receipt_id = ${receiptId} AND tenant_id = ${tenantId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.receipt))
      )

    return { insertOrFetch, find } as const
  })
}) {}
