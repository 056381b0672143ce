/**
 * What a relying party runs without the service: checks of a receipt's proof bundle and of two
 * checkpoints of the transparency log. Pure (no I/O), and never throws on what it is given: every
 * malformed member is a failed step with a detail.
 */
import type { KeyObject } from "node:crypto"
import { canonicalJson, digestOf } from "../domain/Canonical.js"
import { kidOf } from "../domain/EventChain.js"
import { keysFromJwks } from "../domain/EventVerify.js"
import { openCheckpoint, peekCheckpoint } from "../log/Checkpoint.js"
import { parseCosignerKey, requireQuorum, type CosignatureVerifier } from "../log/Cosignature.js"
import { parseLogEntry, ReceiptEntryType, verifyReceiptSignature } from "../log/Entries.js"
import { hashesFromHex, hashEquals, hexOf, leafHash, verifyConsistency, verifyInclusion, type Hash } from "../log/Merkle.js"
import { parseVerifierKey, publicKeyFromRaw, type NoteVerifier } from "../log/Note.js"
import { MaxEntrySize } from "../log/Tiles.js"

export type { ReceiptProofBundle, SignedRelianceReceipt } from "../log/ReceiptProof.js"
export type { ConsistencyProof, InclusionProof } from "../log/Merkle.js"

export type BundleStep = "digest" | "entry" | "leaf" | "inclusion" | "checkpoint_signature" | "witness_cosignatures" | "receipt_signature"

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
 * (`<name>+<key ID>+base64(0x04 ‖ key)`, GET /witness/key of each), and how many of them must have
 * cosigned the checkpoint (default: all).
 */
export interface WitnessPolicy {
  readonly witnesses?: ReadonlyArray<string | CosignatureVerifier>
  readonly quorum?: number
  /** The verifier's time in POSIX seconds (default: now): a cosignature more than 60 s after it is refused. */
  readonly nowSeconds?: number
}

export interface BundleVerifyOptions extends WitnessPolicy {
  readonly receiptKeys?: ReceiptKeys
  /** The log's note verifier key the relying party pins; without it the bundle's own is used. */
  readonly verifierKey?: string | NoteVerifier
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const shown = (u: unknown): string => {
  try {
    return JSON.stringify(u) ?? String(u)
  } catch {
    return String(u)
  }
}

const isNoteVerifier = (u: unknown): u is NoteVerifier => isRecord(u) && typeof u.verify === "function"

const keyMapOf = (keys: ReceiptKeys): ReadonlyMap<string, KeyObject> => {
  if (keys instanceof Uint8Array) {
    if (keys.length !== 32) return new Map()
    try {
      return new Map([[kidOf(keys), publicKeyFromRaw(keys)]])
    } catch {
      return new Map()
    }
  }
  return keysFromJwks(keys)
}

const stepOf = (step: BundleStep, ok: boolean, detail: string): BundleStepResult => ({ step, ok, checked: true, detail })

const digestStep = (receipt: unknown): BundleStepResult => {
  const fail = (detail: string) => stepOf("digest", false, detail)
  if (!isRecord(receipt)) return fail("receipt is not an object")
  const snapshot = receipt.snapshot_payload
  if (!isRecord(snapshot)) return fail("receipt.snapshot_payload is not an object")
  if (typeof receipt.receipt_digest !== "string") return fail("receipt.receipt_digest is not a string")
  let recomputed: string
  try {
    recomputed = digestOf(snapshot)
  } catch {
    return fail("snapshot_payload has no canonical JSON form")
  }
  if (recomputed !== receipt.receipt_digest) {
    return fail(`receipt_digest ${receipt.receipt_digest} is not the digest of snapshot_payload (recomputed ${recomputed})`)
  }
  for (const [field, value] of Object.entries(snapshot)) {
    if (!Object.hasOwn(receipt, field)) return fail(`receipt.${field} is missing (snapshot_payload has it)`)
    try {
      if (digestOf(receipt[field]) !== digestOf(value)) return fail(`receipt.${field} differs from snapshot_payload.${field}`)
    } catch {
      return fail(`receipt.${field} has no canonical JSON form`)
    }
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

const leafStep = (logEntry: unknown): { readonly result: BundleStepResult; readonly leaf?: Hash } => {
  const fail = (detail: string) => ({ result: stepOf("leaf", false, detail) })
  if (!isRecord(logEntry)) return fail("log_entry is not an object")
  let bytes: Buffer
  try {
    bytes = Buffer.from(canonicalJson(logEntry), "utf8")
  } catch {
    return fail("log_entry has no canonical JSON form")
  }
  if (bytes.length > MaxEntrySize) return fail(`log_entry is ${bytes.length} bytes; log entries are at most ${MaxEntrySize}`)
  const leaf = leafHash(bytes)
  return { result: stepOf("leaf", true, `leaf hash ${hexOf(leaf)} = SHA-256(0x00 ‖ JCS(log_entry))`), leaf }
}

const inclusionStep = (bundle: Record<string, unknown>, leaf: Hash | undefined): BundleStepResult => {
  const fail = (detail: string) => stepOf("inclusion", false, detail)
  if (leaf === undefined) return fail("there is no leaf hash to prove (see the leaf step)")
  const index = bundle.leaf_index
  if (!Number.isSafeInteger(index) || (index as number) < 0) return fail(`leaf_index ${shown(index)} is not a non-negative integer`)
  const path = hashesFromHex(bundle.inclusion_path)
  if (path === undefined) return fail("inclusion_path is not an array of 64-hex hashes")
  const checkpoint = peekCheckpoint(bundle.checkpoint)
  if (!checkpoint.ok) return fail(`checkpoint: ${checkpoint.detail}`)
  const { size, root } = checkpoint.value
  if ((index as number) >= size) return fail(`leaf_index ${index as number} is not below the checkpoint's tree size ${size}`)
  return verifyInclusion({ index: index as number, size, leaf, path, root })
    ? stepOf("inclusion", true, `leaf ${index as number} is in the tree of size ${size} with root ${hexOf(root)}`)
    : fail(`inclusion_path does not lead from leaf ${index as number} to the root of the tree of size ${size}`)
}

const checkpointStep = (
  bundle: Record<string, unknown>,
  pinned: string | NoteVerifier | undefined
): BundleStepResult => {
  const fail = (detail: string) => stepOf("checkpoint_signature", false, detail)
  const source = pinned === undefined ? "the bundle's own verifier_key (not pinned)" : "the pinned verifier key"
  const key = pinned ?? bundle.verifier_key
  const verifier = isNoteVerifier(key) ? { ok: true as const, value: key } : parseVerifierKey(key)
  if (!verifier.ok) return fail(`${source} is not usable: ${verifier.detail}`)
  const opened = openCheckpoint(bundle.checkpoint, verifier.value)
  if (!opened.ok) return fail(`with ${source}: ${opened.detail}`)
  return stepOf("checkpoint_signature", true, `checkpoint of ${opened.value.origin} at size ${opened.value.size} is signed by ${source}`)
}

const hasWitnesses = (policy: WitnessPolicy) => policy.witnesses !== undefined && policy.witnesses.length > 0

/** Whether a quorum of the pinned witnesses validly cosigned a checkpoint note, and the detail either way. */
export const witnessQuorumProblem = (note: unknown, policy: WitnessPolicy): { readonly ok: true; readonly detail: string } | { readonly ok: false; readonly detail: string } => {
  const verifiers: Array<CosignatureVerifier> = []
  for (const witness of policy.witnesses ?? []) {
    if (typeof witness !== "string") {
      verifiers.push(witness)
      continue
    }
    const parsed = parseCosignerKey(witness)
    if (!parsed.ok) return { ok: false, detail: `the witness key ${witness} is not usable: ${parsed.detail}` }
    verifiers.push(parsed.value)
  }
  const quorum = policy.quorum ?? verifiers.length
  if (!Number.isSafeInteger(quorum) || quorum < 1 || quorum > verifiers.length) {
    return { ok: false, detail: `the quorum ${shown(policy.quorum)} is not between 1 and the ${verifiers.length} pinned witness(es)` }
  }
  const nowSeconds = policy.nowSeconds ?? Math.floor(Date.now() / 1000)
  const checked = requireQuorum(note, verifiers, quorum, nowSeconds)
  if (!checked.ok) return checked
  return { ok: true, detail: `${checked.value.length} of ${verifiers.length} pinned witnesses cosigned the checkpoint (${checked.value.map((w) => w.name).join(", ")}); the quorum is ${quorum}` }
}

const witnessStep = (bundle: Record<string, unknown>, policy: WitnessPolicy): BundleStepResult => {
  const verdict = witnessQuorumProblem(bundle.checkpoint, policy)
  return stepOf("witness_cosignatures", verdict.ok, verdict.detail)
}

const receiptSignatureStep = (
  receipt: unknown,
  keys: ReceiptKeys | undefined,
  source: "pinned" | "bundle" | "none"
): BundleStepResult => {
  if (keys === undefined) {
    return { step: "receipt_signature", ok: false, checked: false, detail: "not checked: no receipt key was supplied and the bundle carries none" }
  }
  const described = source === "pinned" ? "the supplied receipt keys" : "the bundle's own receipt_key (not pinned)"
  const map = keyMapOf(keys)
  if (map.size === 0) return stepOf("receipt_signature", false, `${described} hold no usable Ed25519 key`)
  if (!isRecord(receipt)) return stepOf("receipt_signature", false, "receipt is not an object")
  const verified = verifyReceiptSignature(receipt.receipt_digest, receipt.signature, map)
  return verified.ok
    ? stepOf("receipt_signature", true, `receipt.signature verifies under kid ${verified.value} from ${described}`)
    : stepOf("receipt_signature", false, `${verified.detail} (keys: ${described})`)
}

/**
 * Checks a proof bundle step by step: digest, entry, leaf, inclusion, checkpoint_signature,
 * receipt_signature. Pin `verifierKey` (the log's note key) and `receiptKeys` (the JWKS or raw key):
 * a key taken from the bundle proves only that the bundle agrees with itself, and `keys` says so.
 */
export const verifyReceiptBundle = (bundle: unknown, options: BundleVerifyOptions = {}): BundleVerdict => {
  const record = isRecord(bundle) ? bundle : {}
  const receipt = record.receipt
  const bundleKey = isRecord(record.receipt_key) ? { keys: [record.receipt_key] } : undefined
  const receiptKeySource = options.receiptKeys !== undefined ? "pinned" : bundleKey !== undefined ? "bundle" : "none"
  const leaf = leafStep(record.log_entry)
  const steps: Array<BundleStepResult> = isRecord(bundle)
    ? [
      digestStep(receipt),
      entryStep(receipt, record.log_entry),
      leaf.result,
      inclusionStep(record, leaf.leaf),
      checkpointStep(record, options.verifierKey),
      ...(hasWitnesses(options) ? [witnessStep(record, options)] : []),
      receiptSignatureStep(receipt, options.receiptKeys ?? bundleKey, receiptKeySource)
    ]
    : ([
      "digest",
      "entry",
      "leaf",
      "inclusion",
      "checkpoint_signature",
      ...(hasWitnesses(options) ? ["witness_cosignatures" as const] : []),
      "receipt_signature"
    ] as const).map((step) => stepOf(step, false, "the bundle is not an object"))
  const failed = steps.find((step) => step.checked && !step.ok)
  const notChecked = steps.filter((step) => !step.checked).map((step) => step.step)
  return {
    ok: steps.every((step) => step.ok),
    steps,
    ...(failed === undefined ? {} : { failed_step: failed.step }),
    not_checked: notChecked,
    keys: { verifier_key: options.verifierKey === undefined ? "bundle" : "pinned", receipt_key: receiptKeySource }
  }
}

export type ConsistencyFailure = "older_checkpoint" | "newer_checkpoint" | "witness_quorum" | "rollback" | "fork" | "malformed_proof" | "inconsistent"

export type ConsistencyVerdict =
  | {
    readonly ok: true
    readonly older: { readonly size: number; readonly root: string }
    readonly newer: { readonly size: number; readonly root: string }
    readonly detail: string
  }
  | { readonly ok: false; readonly failure: ConsistencyFailure; readonly detail: string }

/**
 * A monitor's check of two checkpoints of one log: both signed by the pinned key, the newer no
 * smaller (else a rollback), equal sizes with equal roots (else a fork), and the consistency path
 * proving the newer tree extends the older one. With pinned witnesses, the newer checkpoint must also
 * carry a quorum of their cosignatures (the older one was checked when it was accepted).
 */
export const verifyCheckpointConsistency = (
  older: unknown,
  newer: unknown,
  consistencyPath: unknown,
  verifierKey: string | NoteVerifier,
  witnesses: WitnessPolicy = {}
): ConsistencyVerdict => {
  const fail = (failure: ConsistencyFailure, detail: string): ConsistencyVerdict => ({ ok: false, failure, detail })
  const first = openCheckpoint(older, verifierKey)
  if (!first.ok) return fail("older_checkpoint", `the older checkpoint: ${first.detail}`)
  const second = openCheckpoint(newer, verifierKey)
  if (!second.ok) return fail("newer_checkpoint", `the newer checkpoint: ${second.detail}`)
  if (hasWitnesses(witnesses)) {
    const quorum = witnessQuorumProblem(newer, witnesses)
    if (!quorum.ok) return fail("witness_quorum", `the newer checkpoint: ${quorum.detail}`)
  }
  const a = first.value
  const b = second.value
  if (b.size < a.size) return fail("rollback", `the newer checkpoint's size ${b.size} is below the older's ${a.size}`)
  if (b.size === a.size && !hashEquals(a.root, b.root)) {
    return fail("fork", `two signed checkpoints of size ${a.size} have different roots (${hexOf(a.root)}, ${hexOf(b.root)})`)
  }
  const path = hashesFromHex(consistencyPath)
  if (path === undefined) return fail("malformed_proof", "consistency_path is not an array of 64-hex hashes")
  if (!verifyConsistency({ first: a.size, second: b.size, firstRoot: a.root, secondRoot: b.root, path })) {
    return fail("inconsistent", `consistency_path does not prove the tree of size ${b.size} extends the tree of size ${a.size}`)
  }
  return {
    ok: true,
    older: { size: a.size, root: hexOf(a.root) },
    newer: { size: b.size, root: hexOf(b.root) },
    detail: a.size === b.size ? `both checkpoints are of size ${a.size} with the same root` : `the tree of size ${b.size} extends the tree of size ${a.size}`
  }
}
