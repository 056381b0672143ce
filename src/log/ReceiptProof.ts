import type { RelianceReceipt } from "../domain/Receipt.js"
import type { EventJwk } from "../domain/TrustEvent.js"
import { peekCheckpoint } from "./Checkpoint.js"
import { entryLeafHashOf, receiptEntryOf, type ReceiptLogEntry, type ReceiptSignature } from "./Entries.js"
import { hashEquals, hexOf, inclusionPath, type SubtreeHash } from "./Merkle.js"

/** A receipt as served once it is logged: the stored receipt and its signature. */
export type SignedRelianceReceipt = RelianceReceipt & { readonly signature: ReceiptSignature }

/**
 * What GET /reliance-receipts/{id}/proof serves: everything a relying party needs to check, offline,
 * that the receipt is what the service signed and that the log holds it under a signed checkpoint.
 * `receipt_key` (the receipt-signing key as a JWK) makes the bundle self-contained; the relying
 * party still pins the keys it trusts.
 */
export interface ReceiptProofBundle {
  readonly receipt: SignedRelianceReceipt
  readonly log_entry: ReceiptLogEntry
  readonly leaf_index: number
  /** The signed checkpoint note the inclusion path leads to. */
  readonly checkpoint: string
  readonly inclusion_path: ReadonlyArray<string>
  /** The checkpoint's note verifier key, `<origin>+<key ID>+<base64 key>`. */
  readonly verifier_key: string
  readonly receipt_key?: EventJwk
}

/**
 * Assembles a bundle from the log's state; throws when the parts disagree (the entry is not the
 * receipt's leaf at that index, or the checkpoint is malformed), which is a defect of the caller.
 */
export const receiptProofBundle = (input: {
  readonly receipt: SignedRelianceReceipt
  readonly leafIndex: number
  readonly checkpoint: string
  readonly subtree: SubtreeHash
  readonly verifierKey: string
  readonly receiptKey?: EventJwk
}): ReceiptProofBundle => {
  const checkpoint = peekCheckpoint(input.checkpoint)
  if (!checkpoint.ok) throw new TypeError(`the checkpoint is malformed: ${checkpoint.detail}`)
  const entry = receiptEntryOf(input.receipt)
  const stored = input.subtree(0, input.leafIndex)
  if (!hashEquals(stored, entryLeafHashOf(entry))) {
    throw new Error(`leaf ${input.leafIndex} is ${hexOf(stored)}, not the entry of receipt ${input.receipt.receipt_id}`)
  }
  return {
    receipt: input.receipt,
    log_entry: entry,
    leaf_index: input.leafIndex,
    checkpoint: input.checkpoint,
    inclusion_path: inclusionPath(input.leafIndex, checkpoint.value.size, input.subtree).map(hexOf),
    verifier_key: input.verifierKey,
    ...(input.receiptKey === undefined ? {} : { receipt_key: input.receiptKey })
  }
}
