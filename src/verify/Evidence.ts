import { bytesEqual, hexOf, isRecord, shown, utf8, utf8Decode } from "./Bytes.js"
import {
  digestStep,
  hasWitnesses,
  MaxEntrySize,
  parseLogEntry,
  ReceiptEntryType,
  receiptKeyMap,
  receiptSignatureStep,
  verifyReceiptBundle,
  witnessQuorum,
  type BundleStep,
  type BundleVerdict,
  type BundleVerifyOptions,
  type ReceiptLogEntry
} from "./Bundle.js"
import { CoseReceiptMediaType, parseCoseReceipt, parseTransparentStatement, sigStructure, statementJson, TransparentStatementMediaType, CoseSign1Tag } from "./Cose.js"
import { canonicalJson } from "./Jcs.js"
import { leafHash, rootFromInclusion } from "./Merkle.js"
import { isNoteKey, openCheckpoint, parseVerifierKey, peekCheckpoint, type NoteKey } from "./Note.js"
import { ed25519Verify, type Verifying } from "./Run.js"
import { parseTlogProof, TlogProofHeader, TlogProofMediaType } from "./TlogProof.js"
import { accept, refuse, type Checked } from "./Checked.js"

/**
 * The four kinds of receipt evidence (docs/API.md "Evidence in standard encodings"): the §10 JSON bundle,
 * a C2SP tlog-proof, an RFC 9942 COSE Receipt and an RFC 9943 Transparent Statement, recognised by content
 * and checked step by step. Like the bundle's, these verifiers never throw: each malformed part is a
 * failed step with a detail, every step runs, and the first one that ran and failed is named.
 */

export type EvidenceKind = "bundle" | "tlog-proof" | "cose-receipt" | "transparent-statement"

export const EvidenceMediaTypes: Readonly<Record<Exclude<EvidenceKind, "bundle">, string>> = {
  "tlog-proof": TlogProofMediaType,
  "cose-receipt": CoseReceiptMediaType,
  "transparent-statement": TransparentStatementMediaType
}

export type EvidenceStep =
  | BundleStep
  /** The bytes are the format, exactly (header lines, CBOR structure, labels). */
  | "format"
  /** The COSE kid names the pinned key. */
  | "kid"
  /** The COSE Receipt's signature over the Merkle root, by the log key. */
  | "log_signature"
  /** The Transparent Statement's signature, by the receipt-signing key. */
  | "statement_signature"
  /** The statement's CWT claims: iss the log origin, sub the receipt id, iat its creation second. */
  | "claims"

export interface EvidenceStepResult {
  readonly step: EvidenceStep
  readonly ok: boolean
  readonly checked: boolean
  readonly detail: string
}

export interface EvidenceVerdict {
  readonly kind: EvidenceKind
  readonly ok: boolean
  readonly steps: ReadonlyArray<EvidenceStepResult>
  readonly failed_step?: EvidenceStep
  readonly not_checked: ReadonlyArray<EvidenceStep>
}

export interface EvidenceVerifyOptions extends BundleVerifyOptions {
  /**
   * What a bare COSE Receipt proves the inclusion of (it does not carry its entry): the receipt as
   * GET /reliance-receipts/{id} returns it, or its log entry. With a tlog-proof it must match `extra`.
   */
  readonly receipt?: unknown
}

const step = (name: EvidenceStep, ok: boolean, detail: string): EvidenceStepResult => ({ step: name, ok, checked: true, detail })
const notChecked = (name: EvidenceStep, detail: string): EvidenceStepResult => ({ step: name, ok: false, checked: false, detail })

const verdictOf = (kind: EvidenceKind, steps: ReadonlyArray<EvidenceStepResult>): EvidenceVerdict => {
  const failed = steps.find((s) => s.checked && !s.ok)
  return {
    kind,
    ok: steps.every((s) => s.ok),
    steps,
    ...(failed === undefined ? {} : { failed_step: failed.step }),
    not_checked: steps.filter((s) => !s.checked).map((s) => s.step)
  }
}

const isBytes = (u: unknown): u is Uint8Array => u instanceof Uint8Array

/** Which kind of evidence this is, by content; undefined when it is none of the four. */
export const evidenceKindOf = (input: unknown): EvidenceKind | undefined => {
  if (isRecord(input) && !isBytes(input)) return "bundle"
  if (typeof input === "string") {
    if (input.startsWith(`${TlogProofHeader}\n`)) return "tlog-proof"
    const trimmed = input.trimStart()
    return trimmed.startsWith("{") ? "bundle" : undefined
  }
  if (!isBytes(input)) return undefined
  if (startsWith(input, utf8(`${TlogProofHeader}\n`))) return "tlog-proof"
  // Tag 18 (0xd2), array of 4 (0x84), then the protected header bstr: a COSE_Sign1. Its labels tell the two apart.
  if (input[0] === 0xc0 + CoseSign1Tag && input[1] === 0x84) {
    const statement = parseTransparentStatement(input)
    if (statement.ok) return "transparent-statement"
    const receipt = parseCoseReceipt(input)
    if (receipt.ok) return "cose-receipt"
    // Malformed: its own verifier names what is wrong; the receipts label (394) marks a statement.
    return hasLabel394(input) ? "transparent-statement" : "cose-receipt"
  }
  const text = utf8Decode(input)
  return text !== undefined && text.trimStart().startsWith("{") ? "bundle" : undefined
}

/** 394 is encoded as 0x19 0x01 0x8a: whether those bytes occur (a statement's receipts label). */
const hasLabel394 = (bytes: Uint8Array): boolean => {
  for (let i = 0; i + 2 < bytes.length; i++) if (bytes[i] === 0x19 && bytes[i + 1] === 0x01 && bytes[i + 2] === 0x8a) return true
  return false
}

const startsWith = (bytes: Uint8Array, prefix: Uint8Array) => bytes.length >= prefix.length && bytesEqual(bytes.subarray(0, prefix.length), prefix)

/** The entry bytes a receipt (or its entry) stands for: UTF-8 of JCS of its pv.log.receipt.v1 entry. */
const entryOfReceipt = (value: unknown): Checked<ReceiptLogEntry> => {
  if (!isRecord(value)) return refuse("the receipt is not an object")
  const entry = value.type === ReceiptEntryType
    ? parseLogEntry(value)
    : parseLogEntry({ type: ReceiptEntryType, receipt_id: value.receipt_id, receipt_digest: value.receipt_digest, created_at: value.created_at })
  if (!entry.ok) return entry
  return entry.value.type === ReceiptEntryType ? accept(entry.value) : refuse(`the entry is a ${entry.value.type} entry, not ${ReceiptEntryType}`)
}

/** Entry bytes as they came (a tlog-proof's extra): a receipt entry in its JCS form. */
const entryOfBytes = (bytes: Uint8Array): Checked<ReceiptLogEntry> => {
  if (bytes.length > MaxEntrySize) return refuse(`the entry is ${bytes.length} bytes; log entries are at most ${MaxEntrySize}`)
  const text = utf8Decode(bytes)
  if (text === undefined) return refuse("the entry is not UTF-8")
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return refuse("the entry is not JSON")
  }
  if (!isRecord(value) || value.type !== ReceiptEntryType) return refuse(`the entry is not a ${ReceiptEntryType} entry`)
  const entry = entryOfReceipt(value)
  if (!entry.ok) return entry
  return canonicalJson(entry.value) === text ? entry : refuse("the entry bytes are not the JCS form of the entry")
}

const sameEntry = (a: ReceiptLogEntry, b: ReceiptLogEntry): string | undefined => {
  for (const field of ["receipt_id", "receipt_digest", "created_at"] as const) {
    if (a[field] !== b[field]) return `${field} ${shown(a[field])} is not the receipt's ${shown(b[field])}`
  }
  return undefined
}

function* pinnedLogKey(options: EvidenceVerifyOptions): Verifying<Checked<NoteKey> | undefined> {
  if (options.verifierKey === undefined) return undefined
  if (isNoteKey(options.verifierKey)) return accept(options.verifierKey)
  return yield* parseVerifierKey(options.verifierKey)
}

function* witnessStep(note: unknown, options: EvidenceVerifyOptions): Verifying<ReadonlyArray<EvidenceStepResult>> {
  if (!hasWitnesses(options)) return []
  if (note === undefined) return [step("witness_cosignatures", false, "a COSE receipt carries no witness cosignatures: ask for the tlog-proof or the bundle")]
  const verdict = yield* witnessQuorum(note, options)
  return [step("witness_cosignatures", verdict.ok, verdict.detail)]
}

/**
 * A C2SP tlog-proof: format, entry (extra is a receipt's entry, and the given receipt's when one is
 * given), leaf, inclusion to the checkpoint's root, checkpoint_signature (pinned log key only: the
 * proof carries no key), [witness_cosignatures].
 */
export function* verifyTlogProof(input: unknown, options: EvidenceVerifyOptions = {}): Verifying<EvidenceVerdict> {
  const parsed = parseTlogProof(input)
  const steps: Array<EvidenceStepResult> = [step("format", parsed.ok, parsed.ok ? `a ${TlogProofHeader} proof of index ${parsed.value.index}` : parsed.detail)]
  const proof = parsed.ok ? parsed.value : undefined
  // entry
  let entryBytes: Uint8Array | undefined
  if (proof === undefined) steps.push(step("entry", false, "there is no proof to read the entry from"))
  else if (proof.extra === undefined) steps.push(step("entry", false, "the proof has no extra line: this log's proofs carry the receipt's entry there"))
  else {
    const entry = entryOfBytes(proof.extra)
    const given = options.receipt === undefined ? undefined : entryOfReceipt(options.receipt)
    const mismatch = entry.ok && given?.ok === true ? sameEntry(entry.value, given.value) : undefined
    if (!entry.ok) steps.push(step("entry", false, `extra: ${entry.detail}`))
    else if (given !== undefined && !given.ok) steps.push(step("entry", false, `the given receipt: ${given.detail}`))
    else if (mismatch !== undefined) steps.push(step("entry", false, `extra's ${mismatch}`))
    else {
      entryBytes = proof.extra
      steps.push(step("entry", true, `extra is the ${ReceiptEntryType} entry of receipt ${entry.value.receipt_id}`))
    }
  }
  const leaf = entryBytes === undefined ? undefined : yield* leafHash(entryBytes)
  steps.push(leaf === undefined ? step("leaf", false, "there is no entry to hash (see the entry step)") : step("leaf", true, `leaf hash ${hexOf(leaf)} = SHA-256(0x00 ‖ extra)`))
  // inclusion
  const checkpoint = proof === undefined ? undefined : peekCheckpoint(proof.checkpoint)
  if (proof === undefined || leaf === undefined) steps.push(step("inclusion", false, "there is no leaf to prove"))
  else if (!checkpoint!.ok) steps.push(step("inclusion", false, `checkpoint: ${checkpoint!.detail}`))
  else {
    const { size, root } = checkpoint!.value
    const computed = proof.index >= size ? undefined : yield* rootFromInclusion({ index: proof.index, size, leaf, path: proof.path })
    steps.push(
      proof.index >= size
        ? step("inclusion", false, `index ${proof.index} is not below the checkpoint's tree size ${size}`)
        : computed !== undefined && bytesEqual(computed, root)
        ? step("inclusion", true, `leaf ${proof.index} is in the tree of size ${size} with root ${hexOf(root)}`)
        : step("inclusion", false, `the inclusion path does not lead from leaf ${proof.index} to the root of the tree of size ${size}`)
    )
  }
  // checkpoint_signature
  const key = yield* pinnedLogKey(options)
  if (key === undefined) steps.push(notChecked("checkpoint_signature", "not checked: a tlog-proof carries no log key; pin it (--verifier-key, GET /log/key)"))
  else if (!key.ok) steps.push(step("checkpoint_signature", false, `the pinned verifier key is not usable: ${key.detail}`))
  else if (proof === undefined) steps.push(step("checkpoint_signature", false, "there is no checkpoint to check"))
  else {
    const opened = yield* openCheckpoint(proof.checkpoint, key.value)
    steps.push(opened.ok
      ? step("checkpoint_signature", true, `checkpoint of ${opened.value.origin} at size ${opened.value.size} is signed by the pinned verifier key`)
      : step("checkpoint_signature", false, opened.detail))
  }
  steps.push(...yield* witnessStep(proof?.checkpoint ?? "", options))
  return verdictOf("tlog-proof", steps)
}

/**
 * The COSE Receipt's own steps, given the entry it should prove: format, leaf, inclusion (the root the
 * path leads to), kid and log_signature (the pinned log key's Ed25519 signature over the Sig_structure
 * with that root as the detached payload).
 */
function* coseReceiptSteps(bytes: unknown, entry: ReceiptLogEntry | undefined, key: Checked<NoteKey> | undefined): Verifying<Array<EvidenceStepResult>> {
  const parsed = parseCoseReceipt(bytes)
  const steps: Array<EvidenceStepResult> = []
  const receipt = parsed.ok ? parsed.value : undefined
  steps.push(step("format", parsed.ok, parsed.ok ? `a COSE Receipt (RFC9162_SHA256) of leaf ${parsed.value.proof.leafIndex} in a tree of size ${parsed.value.proof.treeSize}` : `the COSE Receipt: ${parsed.detail}`))
  const leaf = entry === undefined ? undefined : yield* leafHash(utf8(canonicalJson(entry)))
  steps.push(leaf === undefined ? step("leaf", false, "there is no entry to hash (see the entry step)") : step("leaf", true, `leaf hash ${hexOf(leaf)} = SHA-256(0x00 ‖ JCS(entry))`))
  let root: Uint8Array | undefined
  if (receipt === undefined || leaf === undefined) steps.push(step("inclusion", false, "there is no proof or no leaf to prove"))
  else {
    const { treeSize, leafIndex, path } = receipt.proof
    root = leafIndex >= treeSize ? undefined : yield* rootFromInclusion({ index: leafIndex, size: treeSize, leaf, path })
    steps.push(
      leafIndex >= treeSize
        ? step("inclusion", false, `leaf_index ${leafIndex} is not below tree_size ${treeSize}`)
        : root === undefined
        ? step("inclusion", false, `the inclusion path has the wrong length for leaf ${leafIndex} of ${treeSize}`)
        : step("inclusion", true, `the path leads from leaf ${leafIndex} to root ${hexOf(root)} of the tree of size ${treeSize}`)
    )
  }
  if (key === undefined) {
    steps.push(notChecked("kid", "not checked: no log key pinned (--verifier-key, GET /log/key)"))
    steps.push(notChecked("log_signature", "not checked: no log key pinned (--verifier-key, GET /log/key)"))
  } else if (!key.ok) {
    steps.push(step("kid", false, `the pinned verifier key is not usable: ${key.detail}`), step("log_signature", false, "no usable log key"))
  } else {
    const kidOk = receipt !== undefined && bytesEqual(receipt.kid, key.value.keyId)
    steps.push(step("kid", kidOk, receipt === undefined ? "there is no kid to check" : kidOk
      ? `kid ${hexOf(receipt.kid)} is the key ID of ${key.value.name}`
      : `kid ${hexOf(receipt.kid)} is not the key ID ${hexOf(key.value.keyId)} of ${key.value.name}`))
    if (receipt === undefined || root === undefined) steps.push(step("log_signature", false, "there is no root to check the signature over (see the inclusion step)"))
    else {
      const ok = yield* ed25519Verify(key.value.publicKey, sigStructure(receipt.protectedBytes, root), receipt.signature)
      steps.push(step("log_signature", ok, ok ? `signed by ${key.value.name} over the root of the tree of size ${receipt.proof.treeSize}` : `the signature does not verify with the key of ${key.value.name} over root ${hexOf(root)}`))
    }
  }
  return steps
}

/** A bare COSE Receipt: entry (from `options.receipt`: a receipt does not carry its entry), then the receipt's steps. */
export function* verifyCoseReceipt(input: unknown, options: EvidenceVerifyOptions = {}): Verifying<EvidenceVerdict> {
  const entry = options.receipt === undefined ? undefined : entryOfReceipt(options.receipt)
  const entryStep = entry === undefined
    ? step("entry", false, "a COSE Receipt does not carry its entry: give the receipt it proves (--receipt FILE)")
    : entry.ok ? step("entry", true, `the ${ReceiptEntryType} entry of receipt ${entry.value.receipt_id}`) : step("entry", false, `the given receipt: ${entry.detail}`)
  const steps = yield* coseReceiptSteps(input, entry?.ok === true ? entry.value : undefined, yield* pinnedLogKey(options))
  steps.splice(1, 0, entryStep)
  steps.push(...yield* witnessStep(undefined, options))
  return verdictOf("cose-receipt", steps)
}

/**
 * A Transparent Statement: format, kid and statement_signature (by the pinned receipt keys), digest
 * (the payload is a receipt whose digest covers its snapshot), claims (iss = the log origin, sub, iat),
 * entry, then the embedded COSE Receipt's steps for that entry, [witness_cosignatures], and the
 * receipt's own receipt_signature.
 */
export function* verifyTransparentStatement(input: unknown, options: EvidenceVerifyOptions = {}): Verifying<EvidenceVerdict> {
  const parsed = parseTransparentStatement(input)
  const statement = parsed.ok ? parsed.value : undefined
  const json = statement === undefined ? undefined : statementJson(statement.payload)
  let receipt: Record<string, unknown> | undefined
  let formatDetail = parsed.ok ? "a Transparent Statement with a receipt payload" : parsed.detail
  if (json !== undefined && !json.ok) formatDetail = json.detail
  else if (json?.ok === true) {
    let canonical: string | undefined
    try {
      canonical = canonicalJson(json.value)
    } catch {
      canonical = undefined
    }
    if (canonical === undefined || !bytesEqual(utf8(canonical), statement!.payload)) formatDetail = "the payload is not the JCS form of the receipt"
    else receipt = json.value
  }
  const steps: Array<EvidenceStepResult> = [step("format", receipt !== undefined, formatDetail)]
  // kid and statement_signature, by the receipt-signing keys the caller pinned
  if (options.receiptKeys === undefined) {
    steps.push(notChecked("kid", "not checked: no receipt-signing keys pinned (--jwks, GET /api/v1/events/keys)"))
    steps.push(notChecked("statement_signature", "not checked: no receipt-signing keys pinned (--jwks, GET /api/v1/events/keys)"))
  } else {
    const keys = yield* receiptKeyMap(options.receiptKeys)
    const key = statement === undefined ? undefined : keys.get(statement.kid)
    steps.push(step("kid", key !== undefined, statement === undefined ? "there is no kid to check" : key !== undefined ? `kid ${statement.kid} is a pinned receipt key` : `no pinned receipt key has kid ${shown(statement.kid)}`))
    const ok = statement !== undefined && key !== undefined && (yield* ed25519Verify(key, sigStructure(statement.protectedBytes, statement.payload), statement.signature))
    steps.push(step("statement_signature", ok, ok ? `signed by receipt key ${statement!.kid}` : "the statement's signature does not verify with the pinned receipt key of its kid"))
  }
  steps.push(receipt === undefined ? step("digest", false, "there is no receipt payload (see the format step)") : yield* digestStep(receipt))
  // claims
  const logKey = yield* pinnedLogKey(options)
  const entry = receipt === undefined ? undefined : entryOfReceipt(receipt)
  if (statement === undefined || entry === undefined || !entry.ok) steps.push(step("claims", false, "there are no claims or no receipt to compare them with"))
  else {
    const { iss, sub, iat } = statement.claims
    const createdSeconds = Math.floor(Date.parse(entry.value.created_at) / 1000)
    const origin = logKey?.ok === true ? logKey.value.name : undefined
    const problem = origin !== undefined && iss !== origin ? `iss ${shown(iss)} is not the log origin ${shown(origin)}`
      : sub !== entry.value.receipt_id ? `sub ${shown(sub)} is not the receipt_id ${shown(entry.value.receipt_id)}`
      : iat !== createdSeconds ? `iat ${iat} is not created_at ${entry.value.created_at} in Unix seconds (${createdSeconds})`
      : undefined
    steps.push(step("claims", problem === undefined, problem ?? `iss ${iss}${origin === undefined ? " (log key not pinned: origin not compared)" : ""}, sub ${sub}, iat ${iat} match the receipt`))
  }
  steps.push(entry === undefined ? step("entry", false, "there is no receipt to derive the entry from") : entry.ok
    ? step("entry", true, `the ${ReceiptEntryType} entry of receipt ${entry.value.receipt_id}, derived from the payload`)
    : step("entry", false, `the payload: ${entry.detail}`))
  const embedded = yield* coseReceiptSteps(statement?.receipts[0], entry?.ok === true ? entry.value : undefined, logKey)
  steps.push(...embedded.map((s) => (s.step === "format" ? { ...s, detail: `embedded receipt: ${s.detail}` } : s)))
  steps.push(...yield* witnessStep(undefined, options))
  steps.push(yield* receiptSignatureStep(receipt, options.receiptKeys, options.receiptKeys === undefined ? "none" : "pinned"))
  return verdictOf("transparent-statement", steps)
}

/** A bundle's verdict in the common shape. */
const fromBundle = (verdict: BundleVerdict): EvidenceVerdict => verdictOf("bundle", verdict.steps)

/**
 * Any of the four kinds, recognised by content (text or bytes; a bundle also as its parsed JSON).
 * Unknown content fails the format step.
 */
export function* verifyEvidence(input: unknown, options: EvidenceVerifyOptions = {}): Verifying<EvidenceVerdict> {
  const kind = evidenceKindOf(input)
  switch (kind) {
    case "tlog-proof":
      return yield* verifyTlogProof(input, options)
    case "cose-receipt":
      return yield* verifyCoseReceipt(input, options)
    case "transparent-statement":
      return yield* verifyTransparentStatement(input, options)
    case "bundle": {
      let bundle: unknown = input
      if (!isRecord(input) || isBytes(input)) {
        const text = typeof input === "string" ? input : utf8Decode(input as Uint8Array) ?? ""
        try {
          bundle = JSON.parse(text)
        } catch {
          return verdictOf("bundle", [step("format", false, "the bundle is not JSON")])
        }
      }
      return fromBundle(yield* verifyReceiptBundle(bundle, options))
    }
    case undefined:
      return verdictOf("bundle", [step("format", false, "neither a proof bundle (JSON), a tlog-proof, a COSE Receipt nor a Transparent Statement")])
  }
}
