import type { CreatedRelianceReceipt, RelianceReceipt } from "../domain/Receipt.js"

/** Receipts kept in memory per map (see `remember`): the newest 1,000, ~2 MB per process. */
const ReceiptCacheEntries = 1_000

/**
 * The idempotency key as one string: its members joined by NUL, which none of them can hold (tenant and
 * subject ids by their patterns, the names as NonEmptyText, the digest is hex; PostgreSQL text cannot hold
 * NUL either, so neither can a stored receipt), so distinct keys never join to the same string.
 */
export const idempotencyKeyOf = (
  r: Pick<RelianceReceipt, "tenant_id" | "principal" | "subject_public_id" | "purpose_id" | "requested_action">,
  determinationDigest: string
) => `${r.tenant_id}\u0000${r.principal}\u0000${r.subject_public_id}\u0000${r.purpose_id}\u0000${r.requested_action}\u0000${determinationDigest}`

/**
 * The receipts this process holds in memory. Stored receipts never change, so a replay
 * or a read can be answered from memory on any instance. Made by the Receipts service, gone with it.
 */
export const receiptMemory = () => {
  // Stored receipts never change, so a replay or a read can be answered from memory on any instance:
  // by idempotency key (replays) and by id (reads). A receipt is ~2 KB of heap in both maps together (they
  // share its parts), so each keeps the newest 1,000 (~2 MB); older ones are read from the database again.
  // 5,000 held ~10 MB per process after a burst of new receipts (heap snapshots after 6,000 receipts).
  // Replays get one shared answer object per receipt, so the edge builds its answer once (ReceiptBodies.ts);
  // it is made on the first replay, not with every new receipt: most are never replayed, and each receipt
  // held is promoted to the old generation, so an answer object made up front cost a copy and its promotion.
  const byIdempotencyKey = new Map<string, RelianceReceipt | CreatedRelianceReceipt>()
  const byId = new Map<string, RelianceReceipt>()
  const remember = (receipt: RelianceReceipt) => {
    if (byIdempotencyKey.size >= ReceiptCacheEntries) byIdempotencyKey.delete(byIdempotencyKey.keys().next().value!)
    byIdempotencyKey.set(idempotencyKeyOf(receipt, receipt.determination_digest), receipt)
    if (byId.size >= ReceiptCacheEntries) byId.delete(byId.keys().next().value!)
    byId.set(receipt.receipt_id, receipt)
  }
  /** The replay of the receipt held for this idempotency key: the same answer object on every replay. */
  const replayOf = (key: string): CreatedRelianceReceipt | undefined => {
    const held = byIdempotencyKey.get(key)
    if (held === undefined || (held as Partial<CreatedRelianceReceipt>).idempotent === true) return held as CreatedRelianceReceipt | undefined
    const replay: CreatedRelianceReceipt = { ...held, idempotent: true }
    // Setting a key that is there keeps its place: the receipt is dropped as soon as it would have been.
    byIdempotencyKey.set(key, replay)
    return replay
  }
  return { replayOf, byId, remember } as const
}
