import type { KeyObject } from "node:crypto"
import { canonicalJson, DigestPattern } from "../domain/Canonical.js"
import type { EventSigningKey } from "../domain/EventChain.js"
import {
  EventEntryType,
  parseLogEntry,
  ReceiptEntryType,
  ReceiptSignatureDomain,
  verifyReceiptSignature as verifyReceiptSignatureWith,
  type EventLogEntry,
  type LogEntry,
  type ReceiptLogEntry
} from "../verify/Bundle.js"
import { jcs } from "../verify/FastJcs.js"
import { verifySync } from "../verify/NodeCrypto.js"
import { refuse, type Checked } from "./Checked.js"
import { leafHash, type Hash } from "./Merkle.js"

/**
 * What the log records (docs/API.md §11.1, §9.4): one entry per receipt and one per event, each the
 * UTF-8 of the JCS form of a small object; and the receipt signature recipe. Parsing entries and
 * checking receipt signatures are src/verify/Bundle.ts's, which the page runs too.
 */
export { EventEntryType, parseLogEntry, ReceiptEntryType, ReceiptSignatureDomain, type EventLogEntry, type LogEntry, type ReceiptLogEntry }

export const receiptEntryOf = (receipt: { readonly receipt_id: string; readonly receipt_digest: string; readonly created_at: string }): ReceiptLogEntry => ({
  type: ReceiptEntryType,
  receipt_id: receipt.receipt_id,
  receipt_digest: receipt.receipt_digest,
  created_at: receipt.created_at
})

export const eventEntryOf = (event: { readonly public_id: string; readonly sequence: number; readonly eventHash: string }): EventLogEntry => ({
  type: EventEntryType,
  public_id: event.public_id,
  sequence: event.sequence,
  eventHash: event.eventHash
})

/**
 * The bytes the log hashes and serves in entry bundles: UTF-8 of JCS(entry). Written by the one-pass JCS
 * writer (verify/FastJcs.ts, `canonicalize`'s text, property-tested): one per receipt and event written.
 */
export const entryBytesOf = (entry: LogEntry): Uint8Array => {
  const text = jcs(entry)
  if (text === undefined) throw new TypeError("value has no canonical JSON form")
  return Buffer.from(text, "utf8")
}

export const entryLeafHashOf = (entry: LogEntry): Hash => leafHash(entryBytesOf(entry))

/** An entry from the bytes an entry bundle holds: JSON that is already in its JCS form. */
export const parseEntryBytes = (bytes: Uint8Array): Checked<LogEntry> => {
  let text: string
  let value: unknown
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes)
    value = JSON.parse(text)
  } catch {
    return refuse("the entry is not UTF-8 JSON")
  }
  const entry = parseLogEntry(value)
  if (!entry.ok) return entry
  return canonicalJson(entry.value) === text ? entry : refuse("the entry bytes are not the JCS form of the entry")
}

export const receiptSigningInputOf = (receiptDigest: string): Uint8Array => {
  if (!DigestPattern.test(receiptDigest)) throw new TypeError("receipt_digest must be 64 lowercase hex characters")
  return Buffer.from(ReceiptSignatureDomain + receiptDigest, "utf8")
}

export interface ReceiptSignature {
  readonly alg: "Ed25519"
  readonly kid: string
  /** base64url without padding. */
  readonly sig: string
}

/** The receipt's `signature` member, by the same kind of key that signs events. */
export const signReceiptDigest = (receiptDigest: string, key: EventSigningKey): ReceiptSignature => ({
  alg: "Ed25519",
  kid: key.kid,
  sig: key.sign(receiptSigningInputOf(receiptDigest))
})

/**
 * Checks a receipt's `signature` member over `receiptDigest` with the key of its kid; the kid the
 * signature verified under is the value.
 */
export const verifyReceiptSignature = (
  receiptDigest: unknown,
  signature: unknown,
  keys: ReadonlyMap<string, KeyObject>
): Checked<string> => {
  const raw = new Map<string, Uint8Array>()
  for (const [kid, key] of keys) raw.set(kid, Buffer.from(key.export({ format: "jwk" }).x as string, "base64url"))
  return verifySync(verifyReceiptSignatureWith(receiptDigest, signature, raw))
}
