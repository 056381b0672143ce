import { ReceiptSchemaId, sealReceipt, type ReceiptSnapshot } from "../../src/domain/Receipt.js"
import { privateKeyFromSeed, signerFromPrivateKey, type SignerShape } from "../../src/events/Signer.js"
import { signCheckpoint } from "../../src/log/Checkpoint.js"
import { entryBytesOf, eventEntryOf, receiptEntryOf, signReceiptDigest, type LogEntry } from "../../src/log/Entries.js"
import { leafHash, rootOf, subtreeHashesOf, type SubtreeHash } from "../../src/log/Merkle.js"
import { noteSignerFromPrivateKey, verifierKeyOfSigner } from "../../src/log/Note.js"
import { receiptProofBundle, type ReceiptProofBundle, type SignedRelianceReceipt } from "../../src/log/ReceiptProof.js"

export const origin = "pv.example/log"
export const logKey = privateKeyFromSeed(Buffer.alloc(32, 11))
export const logSigner = noteSignerFromPrivateKey(origin, logKey)
export const logVerifierKey = verifierKeyOfSigner(origin, logKey)
export const otherLogKey = privateKeyFromSeed(Buffer.alloc(32, 12))

export const receiptSigner: SignerShape = signerFromPrivateKey(privateKeyFromSeed(Buffer.alloc(32, 13)), "seed")
export const otherReceiptSigner: SignerShape = signerFromPrivateKey(privateKeyFromSeed(Buffer.alloc(32, 14)), "seed")
export const receiptJwks = { keys: [receiptSigner.jwk] }

/** A snapshot with every field of docs/API.md §9.2, fixed except its id and time. */
export const snapshotOf = (n: number): ReceiptSnapshot => ({
  schema: ReceiptSchemaId,
  receipt_id: `rr_01J${String(n).padStart(23, "0")}`,
  created_at: new Date(Date.UTC(2031, 2, 1) + n * 1000).toISOString(),
  tenant_id: "tenant-a",
  organization: "Acme Procurement",
  principal: "agent:buyer-7",
  subject_public_id: "DET-V1-LOG-0001" as ReceiptSnapshot["subject_public_id"],
  purpose_id: "vendor-onboarding",
  requested_action: "approve",
  claim_scope: ["identity"],
  determination_id: "dv_01J00000000000000000000001",
  determination_digest: "d".repeat(64),
  trust_state_digest: "a".repeat(64),
  policy_version: "1.0.0",
  policy_digest: "b".repeat(64),
  tier: "T2",
  lifecycle_state: "ACTIVE",
  freshness_state: "CURRENT",
  decision: "ACTIONABLE",
  verdicts: [{ check: "freshness", outcome: "PASS", reason: "current" }],
  authority_state: "ISSUANCE_NOT_AUTHORIZED",
  credential_state: "NOT_ISSUED"
})

export const signedReceiptOf = (n: number, signer: SignerShape = receiptSigner): SignedRelianceReceipt => {
  const receipt = sealReceipt(snapshotOf(n))
  return { ...receipt, signature: signReceiptDigest(receipt.receipt_digest, signer) }
}

export interface TestLog {
  readonly entries: ReadonlyArray<LogEntry>
  readonly receipts: ReadonlyMap<number, SignedRelianceReceipt>
  readonly subtree: SubtreeHash
  readonly size: number
  readonly checkpoint: string
}

/**
 * A log of `size` entries, every third a receipt and the rest events, with a checkpoint at `size`.
 * Logs of one `history` share their prefixes; another history differs in its event entries.
 */
export const buildLog = (size: number, history = 0): TestLog => {
  const entries: Array<LogEntry> = []
  const receipts = new Map<number, SignedRelianceReceipt>()
  for (let i = 0; i < size; i++) {
    if (i % 3 === 0) {
      const receipt = signedReceiptOf(i)
      receipts.set(i, receipt)
      entries.push(receiptEntryOf(receipt))
    } else {
      entries.push(eventEntryOf({ public_id: "DET-V1-LOG-0001", sequence: i, eventHash: ((i + history) % 16).toString(16).repeat(64) }))
    }
  }
  const subtree = subtreeHashesOf(entries.map((entry) => leafHash(entryBytesOf(entry))))
  const checkpoint = signCheckpoint({ origin, size, root: rootOf(size, subtree), extensions: [] }, logSigner)
  return { entries, receipts, subtree, size, checkpoint }
}

export const bundleFor = (log: TestLog, index: number, withReceiptKey = false): ReceiptProofBundle =>
  receiptProofBundle({
    receipt: log.receipts.get(index)!,
    leafIndex: index,
    checkpoint: log.checkpoint,
    subtree: log.subtree,
    verifierKey: logVerifierKey,
    ...(withReceiptKey ? { receiptKey: receiptSigner.jwk } : {})
  })

/** A deep copy through JSON, as a relying party receives the bundle. */
export const overTheWire = <A>(value: A): any => JSON.parse(JSON.stringify(value))
