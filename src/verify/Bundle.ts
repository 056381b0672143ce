import { hashesFromHex, hexOf, HexHashPattern, isRecord, shown, utf8 } from "./Bytes.js"
import { kidOf, rawKeysFromJwks, signatureBytes } from "./Chain.js"
import { accept, refuse, type Checked } from "./Checked.js"
import { canonicalJson, sha256Hex } from "./Jcs.js"
import { leafHash, verifyInclusion } from "./Merkle.js"
import { distinctWitnesses, isNoteKey, openCheckpoint, parseCosignerKey, parseVerifierKey, peekCheckpoint, requireQuorum, type NoteKey } from "./Note.js"
import { parsePolicy, policyLogKey, policyQuorum, type TlogPolicy } from "./Policy.js"
import { ed25519Key, ed25519Verify, type Verifying } from "./Run.js"

/**
 * A receipt's proof bundle (docs/API.md, "Transparency log"), checked step by step by a relying party,
 * and what it needs of the log entries it holds. Never throws on what it is given: every malformed
 * member is a failed step with a detail.
 */

export type BundleStep = "digest" | "entry" | "leaf" | "inclusion" | "checkpoint_signature" | "witness_cosignatures" | "receipt_signature"

/** Every step, in order; `witness_cosignatures` only runs with pinned witnesses. */
export const BundleSteps: ReadonlyArray<BundleStep> = ["digest", "entry", "leaf", "inclusion", "checkpoint_signature", "witness_cosignatures", "receipt_signature"]

export interface BundleStepResult {
  readonly step: BundleStep
  /** True only when the step ran and passed. */
  readonly ok: boolean
  /** False when there was nothing to check with (no receipt key): the step neither passed nor failed. */
  readonly checked: boolean
  readonly detail: string
}

export interface BundleVerdict {
  /** Every step ran and passed. */
  readonly ok: boolean
  /**
   * All six steps, in order (seven with pinned witnesses: witness_cosignatures after
   * checkpoint_signature); each runs even when an earlier one failed.
   */
  readonly steps: ReadonlyArray<BundleStepResult>
  /** The first step that ran and failed. */
  readonly failed_step?: BundleStep
  readonly not_checked: ReadonlyArray<BundleStep>
  /**
   * Where the keys came from: "pinned" is the caller's; "bundle" is the bundle vouching for itself,
   * which proves the parts agree but not who signed them.
   */
  readonly keys: { readonly verifier_key: "pinned" | "bundle"; readonly receipt_key: "pinned" | "bundle" | "none" }
}

/** Receipt-signing public keys: the JWKS of GET /events/keys, or one raw 32-byte Ed25519 key. */
export type ReceiptKeys = { readonly keys: ReadonlyArray<unknown> } | Uint8Array

/**
 * Witnesses a relying party pins (docs/API.md, "Witnesses"): their cosignature/v1 verifier keys
 * (`<name>+<key ID>+base64(0x04 ‖ key)`, GET /witness/key of each, or already parsed), and how many
 * of them must have cosigned the checkpoint (default: all).
 */
export interface WitnessPolicy {
  readonly witnesses?: ReadonlyArray<string | NoteKey>
  readonly quorum?: number
  /**
   * A C2SP tlog-policy (its text, or parsed): its quorum must be met as well, and its log keys stand in
   * for `verifierKey` when that is not given.
   */
  readonly policy?: string | TlogPolicy
  /** The verifier's time in POSIX seconds (default: now): a cosignature more than 60 s after it is refused. */
  readonly nowSeconds?: number
}

export interface BundleVerifyOptions extends WitnessPolicy {
  readonly receiptKeys?: ReceiptKeys
  /** The log's note verifier key the relying party pins; without it the bundle's own is used. */
  readonly verifierKey?: string | NoteKey
}

export const ReceiptEntryType = "pv.log.receipt.v1" as const
export const EventEntryType = "pv.log.event.v1" as const

/** The largest entry the log takes (it is served in tiles with a 16-bit length). */
export const MaxEntrySize = 0xffff

/** The receipt signature covers the UTF-8 of this prefix followed by the 64 hex of receipt_digest. */
export const ReceiptSignatureDomain = "pv-receipt-v1\n"

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

const hasExactly = (value: Record<string, unknown>, members: ReadonlyArray<string>): boolean => {
  const keys = Object.keys(value)
  return keys.length === members.length && members.every((member) => Object.hasOwn(value, member))
}

const nonEmpty = (u: unknown): u is string => typeof u === "string" && u.length > 0

/** An entry as it came over the wire (a bundle's JSON, a decoded entry): exactly one of the two shapes, rebuilt. */
export const parseLogEntry = (value: unknown): Checked<LogEntry> => {
  if (!isRecord(value)) return refuse("the log entry is not an object")
  if (value.type === ReceiptEntryType) {
    if (!hasExactly(value, ["type", "receipt_id", "receipt_digest", "created_at"])) {
      return refuse("a receipt entry has exactly type, receipt_id, receipt_digest and created_at")
    }
    if (!nonEmpty(value.receipt_id) || !nonEmpty(value.created_at)) return refuse("receipt_id and created_at are non-empty strings")
    if (typeof value.receipt_digest !== "string" || !HexHashPattern.test(value.receipt_digest)) return refuse("receipt_digest is not 64 lowercase hex")
    return accept({ type: ReceiptEntryType, receipt_id: value.receipt_id, receipt_digest: value.receipt_digest, created_at: value.created_at })
  }
  if (value.type === EventEntryType) {
    if (!hasExactly(value, ["type", "public_id", "sequence", "eventHash"])) {
      return refuse("an event entry has exactly type, public_id, sequence and eventHash")
    }
    if (!nonEmpty(value.public_id)) return refuse("public_id is a non-empty string")
    if (!Number.isSafeInteger(value.sequence) || (value.sequence as number) < 1) return refuse("sequence is a positive integer")
    if (typeof value.eventHash !== "string" || !HexHashPattern.test(value.eventHash)) return refuse("eventHash is not 64 lowercase hex")
    return accept({ type: EventEntryType, public_id: value.public_id, sequence: value.sequence as number, eventHash: value.eventHash })
  }
  return refuse(`the entry type ${JSON.stringify(value.type)} is neither ${ReceiptEntryType} nor ${EventEntryType}`)
}

/**
 * Checks a receipt's `signature` member over `receiptDigest` with the key of its kid (raw keys by kid);
 * the kid the signature verified under is the value.
 */
export function* verifyReceiptSignature(receiptDigest: unknown, signature: unknown, keys: ReadonlyMap<string, Uint8Array>): Verifying<Checked<string>> {
  if (typeof receiptDigest !== "string" || !HexHashPattern.test(receiptDigest)) return refuse("receipt_digest is not 64 lowercase hex")
  if (!isRecord(signature) || signature.alg !== "Ed25519" || typeof signature.kid !== "string" || typeof signature.sig !== "string") {
    return refuse("signature is not { alg: \"Ed25519\", kid, sig }")
  }
  const key = keys.get(signature.kid)
  if (key === undefined) return refuse(`no receipt key has kid ${signature.kid}`)
  const sig = signatureBytes(signature.sig)
  if (sig === undefined) return refuse("sig is not 64 bytes of unpadded base64url")
  return (yield* ed25519Verify(key, utf8(ReceiptSignatureDomain + receiptDigest), sig))
    ? accept(signature.kid)
    : refuse(`the signature does not verify with key ${signature.kid}`)
}

export const stepOf = (step: BundleStep, ok: boolean, detail: string): BundleStepResult => ({ step, ok, checked: true, detail })

/** A digest, or undefined for a value without a canonical JSON form. */
function* digestOrUndefined(value: unknown): Verifying<string | undefined> {
  let text: string
  try {
    text = canonicalJson(value)
  } catch {
    return undefined
  }
  return yield* sha256Hex(text)
}

export function* digestStep(receipt: unknown): Verifying<BundleStepResult> {
  const fail = (detail: string) => stepOf("digest", false, detail)
  if (!isRecord(receipt)) return fail("receipt is not an object")
  const snapshot = receipt.snapshot_payload
  if (!isRecord(snapshot)) return fail("receipt.snapshot_payload is not an object")
  if (typeof receipt.receipt_digest !== "string") return fail("receipt.receipt_digest is not a string")
  const recomputed = yield* digestOrUndefined(snapshot)
  if (recomputed === undefined) return fail("snapshot_payload has no canonical JSON form")
  if (recomputed !== receipt.receipt_digest) {
    return fail(`receipt_digest ${receipt.receipt_digest} is not the digest of snapshot_payload (recomputed ${recomputed})`)
  }
  for (const [field, value] of Object.entries(snapshot)) {
    if (!Object.hasOwn(receipt, field)) return fail(`receipt.${field} is missing (snapshot_payload has it)`)
    const mine = yield* digestOrUndefined(receipt[field])
    const theirs = yield* digestOrUndefined(value)
    if (mine === undefined || theirs === undefined) return fail(`receipt.${field} has no canonical JSON form`)
    if (mine !== theirs) return fail(`receipt.${field} differs from snapshot_payload.${field}`)
  }
  return stepOf("digest", true, `receipt_digest ${recomputed} is the digest of snapshot_payload, and the receipt's fields match it`)
}

const entryStep = (receipt: unknown, logEntry: unknown): BundleStepResult => {
  const fail = (detail: string) => stepOf("entry", false, detail)
  const entry = parseLogEntry(logEntry)
  if (!entry.ok) return fail(`log_entry: ${entry.detail}`)
  if (entry.value.type !== ReceiptEntryType) return fail(`log_entry is a ${entry.value.type} entry, not ${ReceiptEntryType}`)
  if (!isRecord(receipt)) return fail("receipt is not an object")
  for (const field of ["receipt_id", "receipt_digest", "created_at"] as const) {
    if (entry.value[field] !== receipt[field]) {
      return fail(`log_entry.${field} ${shown(entry.value[field])} is not the receipt's ${shown(receipt[field])}`)
    }
  }
  return stepOf("entry", true, `log_entry is the ${ReceiptEntryType} entry of receipt ${entry.value.receipt_id}`)
}

function* leafStep(logEntry: unknown): Verifying<{ readonly result: BundleStepResult; readonly leaf?: Uint8Array }> {
  const fail = (detail: string) => ({ result: stepOf("leaf", false, detail) })
  if (!isRecord(logEntry)) return fail("log_entry is not an object")
  let bytes: Uint8Array
  try {
    bytes = utf8(canonicalJson(logEntry))
  } catch {
    return fail("log_entry has no canonical JSON form")
  }
  if (bytes.length > MaxEntrySize) return fail(`log_entry is ${bytes.length} bytes; log entries are at most ${MaxEntrySize}`)
  const leaf = yield* leafHash(bytes)
  return { result: stepOf("leaf", true, `leaf hash ${hexOf(leaf)} = SHA-256(0x00 ‖ JCS(log_entry))`), leaf }
}

function* inclusionStep(bundle: Record<string, unknown>, leaf: Uint8Array | undefined): Verifying<BundleStepResult> {
  const fail = (detail: string) => stepOf("inclusion", false, detail)
  if (leaf === undefined) return fail("there is no leaf hash to prove (see the leaf step)")
  const index = bundle.leaf_index
  if (!Number.isSafeInteger(index) || (index as number) < 0) return fail(`leaf_index ${shown(index)} is not a non-negative integer`)
  const at = index as number
  const path = hashesFromHex(bundle.inclusion_path)
  if (path === undefined) return fail("inclusion_path is not an array of 64-hex hashes")
  const checkpoint = peekCheckpoint(bundle.checkpoint)
  if (!checkpoint.ok) return fail(`checkpoint: ${checkpoint.detail}`)
  const { size, root } = checkpoint.value
  if (at >= size) return fail(`leaf_index ${at} is not below the checkpoint's tree size ${size}`)
  return (yield* verifyInclusion({ index: at, size, leaf, path, root }))
    ? stepOf("inclusion", true, `leaf ${at} is in the tree of size ${size} with root ${hexOf(root)}`)
    : fail(`inclusion_path does not lead from leaf ${at} to the root of the tree of size ${size}`)
}

function* checkpointStep(bundle: Record<string, unknown>, pinned: string | NoteKey | undefined): Verifying<BundleStepResult> {
  const fail = (detail: string) => stepOf("checkpoint_signature", false, detail)
  const source = pinned === undefined ? "the bundle's own verifier_key (not pinned)" : "the pinned verifier key"
  const key = pinned ?? bundle.verifier_key
  const verifier = isNoteKey(key) ? accept(key) : yield* parseVerifierKey(key)
  if (!verifier.ok) return fail(`${source} is not usable: ${verifier.detail}`)
  const opened = yield* openCheckpoint(bundle.checkpoint, verifier.value)
  if (!opened.ok) return fail(`with ${source}: ${opened.detail}`)
  return stepOf("checkpoint_signature", true, `checkpoint of ${opened.value.origin} at size ${opened.value.size} is signed by ${source}`)
}

const pinsWitnesses = (policy: WitnessPolicy): boolean => policy.witnesses !== undefined && policy.witnesses.length > 0

/** The policy given as text or parsed, parsed (an error names its line). */
export function* policyOf(policy: string | TlogPolicy): Verifying<Checked<TlogPolicy>> {
  return typeof policy === "string" ? yield* parsePolicy(policy) : accept(policy)
}

/** Whether a checkpoint must carry cosignatures: witnesses are pinned, or a policy is given (its quorum may be `none`). */
export const hasWitnesses = (policy: WitnessPolicy): boolean => pinsWitnesses(policy) || policy.policy !== undefined

/**
 * Whether a quorum of the pinned witnesses validly cosigned a checkpoint note, and the detail either
 * way; with a policy, whether its quorum is met (and the pinned witnesses' too, when both are given).
 */
export function* witnessQuorum(note: unknown, policy: WitnessPolicy): Verifying<{ readonly ok: boolean; readonly detail: string }> {
  const nowSeconds = policy.nowSeconds ?? Math.floor(Date.now() / 1000)
  if (policy.policy === undefined) return yield* pinnedQuorum(note, policy, nowSeconds)
  const parsed = yield* policyOf(policy.policy)
  if (!parsed.ok) return { ok: false, detail: `the policy: ${parsed.detail}` }
  const met = yield* policyQuorum(note, parsed.value, nowSeconds)
  if (!met.ok || !pinsWitnesses(policy)) return met.ok ? { ok: true, detail: met.value } : met
  const pinned = yield* pinnedQuorum(note, policy, nowSeconds)
  return pinned.ok ? { ok: true, detail: `${met.value}; ${pinned.detail}` } : pinned
}

/** The log key a policy pins for a checkpoint note's origin (undefined without a policy, or one that lists no log or does not parse). */
export function* policyVerifierKey(options: WitnessPolicy, checkpoint: unknown): Verifying<NoteKey | undefined> {
  if (options.policy === undefined) return undefined
  const parsed = yield* policyOf(options.policy)
  if (!parsed.ok) return undefined
  const peeked = peekCheckpoint(checkpoint)
  return yield* policyLogKey(parsed.value, peeked.ok ? peeked.value.origin : undefined)
}

function* pinnedQuorum(note: unknown, policy: WitnessPolicy, nowSeconds: number): Verifying<{ readonly ok: boolean; readonly detail: string }> {
  const verifiers: Array<NoteKey> = []
  for (const witness of policy.witnesses ?? []) {
    if (typeof witness !== "string") {
      verifiers.push(witness)
      continue
    }
    const parsed = yield* parseCosignerKey(witness)
    if (!parsed.ok) return { ok: false, detail: `the witness key ${witness} is not usable: ${parsed.detail}` }
    verifiers.push(parsed.value)
  }
  const distinct = distinctWitnesses(verifiers)
  const quorum = policy.quorum ?? distinct.length
  if (!Number.isSafeInteger(quorum) || quorum < 1 || quorum > distinct.length) {
    return { ok: false, detail: `the quorum ${shown(policy.quorum)} is not between 1 and the ${distinct.length} distinct pinned witness(es)` }
  }
  const checked = yield* requireQuorum(note, distinct, quorum, nowSeconds)
  if (!checked.ok) return checked
  const names = checked.value.map((w) => w.witness.name).join(", ")
  return { ok: true, detail: `${checked.value.length} of ${distinct.length} pinned witnesses cosigned the checkpoint (${names}); the quorum is ${quorum}` }
}

/** Raw keys by kid: a JWKS's usable keys, or one raw key under its own kid. */
export function* receiptKeyMap(keys: ReceiptKeys): Verifying<ReadonlyMap<string, Uint8Array>> {
  if (keys instanceof Uint8Array) {
    if (keys.length !== 32 || !(yield* ed25519Key(keys))) return new Map()
    return new Map([[yield* kidOf(keys), keys]])
  }
  return yield* rawKeysFromJwks(keys)
}

export function* receiptSignatureStep(receipt: unknown, keys: ReceiptKeys | undefined, source: "pinned" | "bundle" | "none"): Verifying<BundleStepResult> {
  if (keys === undefined) {
    return { step: "receipt_signature", ok: false, checked: false, detail: "not checked: no receipt key was supplied and the bundle carries none" }
  }
  const described = source === "pinned" ? "the supplied receipt keys" : "the bundle's own receipt_key (not pinned)"
  const map = yield* receiptKeyMap(keys)
  if (map.size === 0) return stepOf("receipt_signature", false, `${described} hold no usable Ed25519 key`)
  if (!isRecord(receipt)) return stepOf("receipt_signature", false, "receipt is not an object")
  const verified = yield* verifyReceiptSignature(receipt.receipt_digest, receipt.signature, map)
  return verified.ok
    ? stepOf("receipt_signature", true, `receipt.signature verifies under kid ${verified.value} from ${described}`)
    : stepOf("receipt_signature", false, `${verified.detail} (keys: ${described})`)
}

/**
 * Checks a proof bundle step by step: digest, entry, leaf, inclusion, checkpoint_signature,
 * [witness_cosignatures,] receipt_signature. Pin `verifierKey` (the log's note key) and `receiptKeys`
 * (the JWKS or raw key): a key taken from the bundle proves only that the bundle agrees with itself,
 * and `keys` says so.
 */
export function* verifyReceiptBundle(bundle: unknown, options: BundleVerifyOptions = {}): Verifying<BundleVerdict> {
  const record = isRecord(bundle) ? bundle : {}
  const receipt = record.receipt
  const bundleKey = isRecord(record.receipt_key) ? { keys: [record.receipt_key] } : undefined
  const receiptKeySource = options.receiptKeys !== undefined ? "pinned" : bundleKey !== undefined ? "bundle" : "none"
  const witnessed = hasWitnesses(options)
  const verifierKey = options.verifierKey ?? (yield* policyVerifierKey(options, record.checkpoint))
  const steps: Array<BundleStepResult> = []
  if (isRecord(bundle)) {
    const leaf = yield* leafStep(record.log_entry)
    steps.push(
      yield* digestStep(receipt),
      entryStep(receipt, record.log_entry),
      leaf.result,
      yield* inclusionStep(record, leaf.leaf),
      yield* checkpointStep(record, verifierKey)
    )
    if (witnessed) {
      const verdict = yield* witnessQuorum(record.checkpoint, options)
      steps.push(stepOf("witness_cosignatures", verdict.ok, verdict.detail))
    }
    steps.push(yield* receiptSignatureStep(receipt, options.receiptKeys ?? bundleKey, receiptKeySource))
  } else {
    for (const step of BundleSteps) {
      if (witnessed || step !== "witness_cosignatures") steps.push(stepOf(step, false, "the bundle is not an object"))
    }
  }
  const failed = steps.find((step) => step.checked && !step.ok)
  return {
    ok: steps.every((step) => step.ok),
    steps,
    ...(failed === undefined ? {} : { failed_step: failed.step }),
    not_checked: steps.filter((step) => !step.checked).map((step) => step.step),
    keys: { verifier_key: verifierKey === undefined ? "bundle" : "pinned", receipt_key: receiptKeySource }
  }
}
