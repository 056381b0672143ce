import { verify, type KeyObject } from "node:crypto"
import { canonicalJson, DigestPattern } from "../domain/Canonical.js"
import type { EventSigningKey } from "../domain/EventChain.js"
import { accept, refuse, type Checked } from "./Checked.js"
import { leafHash, type Hash } from "./Merkle.js"

/**
 * What the log records (docs/API.md §11.1, §9.4): one entry per receipt and one per event, each the
 * UTF-8 of the JCS form of a small object; and the receipt signature recipe.
 */
export const ReceiptEntryType = "pv.log.receipt.v1" as const
export const EventEntryType = "pv.log.event.v1" as const

export interface ReceiptLogEntry {
  readonly type: typeof ReceiptEntryType
  readonly receipt_id: string
  readonly receipt_digest: string
  readonly created_at: string
}

export interface EventLogEntry {
  readonly type: typeof EventEntryType
  readonly public_id: string
  readonly sequence: number
  readonly eventHash: string
}

export type LogEntry = ReceiptLogEntry | EventLogEntry

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

/** The bytes the log hashes and serves in entry bundles: UTF-8 of JCS(entry). */
export const entryBytesOf = (entry: LogEntry): Uint8Array => Buffer.from(canonicalJson(entry), "utf8")

export const entryLeafHashOf = (entry: LogEntry): Hash => leafHash(entryBytesOf(entry))

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const hasExactly = (value: Record<string, unknown>, members: ReadonlyArray<string>): boolean => {
  const keys = Object.keys(value)
  return keys.length === members.length && members.every((member) => Object.hasOwn(value, member))
}

const nonEmpty = (u: unknown): u is string => typeof u === "string" && u.length > 0

/** An entry as it came over the wire (a bundle's JSON, a decoded entry): exactly one of the two shapes. */
export const parseLogEntry = (value: unknown): Checked<LogEntry> => {
  if (!isRecord(value)) return refuse("the log entry is not an object")
  if (value.type === ReceiptEntryType) {
    if (!hasExactly(value, ["type", "receipt_id", "receipt_digest", "created_at"])) {
      return refuse("a receipt entry has exactly type, receipt_id, receipt_digest and created_at")
    }
    if (!nonEmpty(value.receipt_id) || !nonEmpty(value.created_at)) return refuse("receipt_id and created_at are non-empty strings")
    if (typeof value.receipt_digest !== "string" || !DigestPattern.test(value.receipt_digest)) return refuse("receipt_digest is not 64 lowercase hex")
    return accept(receiptEntryOf(value as unknown as ReceiptLogEntry))
  }
  if (value.type === EventEntryType) {
    if (!hasExactly(value, ["type", "public_id", "sequence", "eventHash"])) {
      return refuse("an event entry has exactly type, public_id, sequence and eventHash")
    }
    if (!nonEmpty(value.public_id)) return refuse("public_id is a non-empty string")
    if (!Number.isSafeInteger(value.sequence) || (value.sequence as number) < 1) return refuse("sequence is a positive integer")
    if (typeof value.eventHash !== "string" || !DigestPattern.test(value.eventHash)) return refuse("eventHash is not 64 lowercase hex")
    return accept(eventEntryOf(value as unknown as EventLogEntry))
  }
  return refuse(`the entry type ${JSON.stringify(value.type)} is neither ${ReceiptEntryType} nor ${EventEntryType}`)
}

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

/** The receipt signature covers the UTF-8 of this prefix followed by the 64 hex of receipt_digest. */
export const ReceiptSignatureDomain = "pv-receipt-v1\n"

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

const SignaturePattern = /^[A-Za-z0-9_-]{86}$/

/**
 * Checks a receipt's `signature` member over `receiptDigest` with the key of its kid; the kid the
 * signature verified under is the value.
 */
export const verifyReceiptSignature = (
  receiptDigest: unknown,
  signature: unknown,
  keys: ReadonlyMap<string, KeyObject>
): Checked<string> => {
  if (typeof receiptDigest !== "string" || !DigestPattern.test(receiptDigest)) return refuse("receipt_digest is not 64 lowercase hex")
  if (!isRecord(signature) || signature.alg !== "Ed25519" || typeof signature.kid !== "string" || typeof signature.sig !== "string") {
    return refuse("signature is not { alg: \"Ed25519\", kid, sig }")
  }
  const key = keys.get(signature.kid)
  if (key === undefined) return refuse(`no receipt key has kid ${signature.kid}`)
  const sig = signature.sig
  const bytes = Buffer.from(sig, "base64url")
  if (!SignaturePattern.test(sig) || bytes.toString("base64url") !== sig) return refuse("sig is not 64 bytes of unpadded base64url")
  let valid = false
  try {
    valid = verify(null, receiptSigningInputOf(receiptDigest), key, bytes)
  } catch {
    valid = false
  }
  return valid ? accept(signature.kid) : refuse(`the signature does not verify with key ${signature.kid}`)
}
