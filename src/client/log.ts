/**
 * What a relying party runs without the service: checks of a receipt's proof bundle and of two
 * checkpoints of the transparency log. Pure (no I/O), and never throws on what it is given: every
 * malformed member is a failed step with a detail.
 */
import { hashesFromHex, hashEquals, hexOf, verifyConsistency } from "../log/Merkle.js"
import type { NoteVerifier } from "../log/Note.js"
import { verifyReceiptBundle as checkReceiptBundle, witnessQuorum, hasWitnesses, type BundleVerdict, type BundleVerifyOptions, type WitnessPolicy } from "../verify/Bundle.js"
import { verifySync } from "../verify/NodeCrypto.js"
import type { Checked } from "../verify/Checked.js"
import { openCheckpoint } from "../verify/Note.js"
import { parsePolicy as parseTlogPolicy, type TlogPolicy } from "../verify/Policy.js"
import { verifyEvidence as checkEvidence, type EvidenceVerdict, type EvidenceVerifyOptions } from "../verify/Evidence.js"

export { evidenceKindOf, EvidenceMediaTypes } from "../verify/Evidence.js"
export type { EvidenceKind, EvidenceStep, EvidenceStepResult, EvidenceVerdict, EvidenceVerifyOptions } from "../verify/Evidence.js"

/**
 * Checks any of the four kinds of receipt evidence, recognised by content: a proof bundle (object or
 * JSON), a C2SP tlog-proof (text or bytes), an RFC 9942 COSE Receipt or an RFC 9943 Transparent
 * Statement (bytes), step by step, naming the first failing step. A bare COSE Receipt needs
 * `options.receipt` (it does not carry its entry). The steps are src/verify/Evidence.ts's, which the page runs too.
 */
export const verifyEvidence = (input: unknown, options: EvidenceVerifyOptions = {}): EvidenceVerdict =>
  verifySync(checkEvidence(input, options))

export type { ReceiptProofBundle, SignedRelianceReceipt } from "../log/ReceiptProof.js"
export type { ConsistencyProof, InclusionProof } from "../log/Merkle.js"

export type { BundleStep, BundleStepResult, BundleVerdict, BundleVerifyOptions, ReceiptKeys, WitnessPolicy } from "../verify/Bundle.js"
export type { PolicyGroup, PolicyLog, PolicyWitness, TlogPolicy } from "../verify/Policy.js"
export { serializePolicy } from "../verify/Policy.js"

/**
 * A C2SP tlog-policy's text (GET /log/policy, or a relying party's own file), parsed and its keys
 * checked; a refusal names the line. The parsed policy (or the text itself) goes in `policy` of the
 * verifiers' options.
 */
export const parsePolicy = (text: string): Checked<TlogPolicy> => verifySync(parseTlogPolicy(text))

/** Whether a quorum of the pinned witnesses validly cosigned a checkpoint note, and the detail either way. */
export const witnessQuorumProblem = (note: unknown, policy: WitnessPolicy): { readonly ok: boolean; readonly detail: string } =>
  verifySync(witnessQuorum(note, policy))

/**
 * Checks a proof bundle step by step: digest, entry, leaf, inclusion, checkpoint_signature,
 * [witness_cosignatures,] receipt_signature. Pin `verifierKey` (the log's note key) and `receiptKeys`
 * (the JWKS or raw key): a key taken from the bundle proves only that the bundle agrees with itself,
 * and `keys` says so. The steps are src/verify/Bundle.ts's, which the page runs with WebCrypto.
 */
export const verifyReceiptBundle = (bundle: unknown, options: BundleVerifyOptions = {}): BundleVerdict =>
  verifySync(checkReceiptBundle(bundle, options))

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
  const first = verifySync(openCheckpoint(older, verifierKey))
  if (!first.ok) return fail("older_checkpoint", `the older checkpoint: ${first.detail}`)
  const second = verifySync(openCheckpoint(newer, verifierKey))
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
