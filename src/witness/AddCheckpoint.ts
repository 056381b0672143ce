import { accept, refuse, type Checked } from "../log/Checked.js"
import { parseCheckpoint, type Checkpoint } from "../log/Checkpoint.js"
import { emptyTreeHash, hashEquals, verifyConsistency, type Hash } from "../log/Merkle.js"
import { splitNote, type NoteVerifier } from "../log/Note.js"

/**
 * The pure rules of C2SP tlog-witness `add-checkpoint` (docs/API.md, "Witnesses"): parsing the body
 * (`old <size>`, up to 63 base64 proof lines, a blank line, the signed checkpoint), checking the log's
 * signatures, and deciding the answer against the size and root the witness holds. The storage side
 * (src/witness/Witness.ts) runs `decide` and stores what it accepts with a compare-and-swap on the held row.
 */
export const MaxProofLines = 63

const SizePattern = /^(0|[1-9][0-9]*)$/

export interface AddCheckpointRequest {
  readonly oldSize: number
  readonly proof: ReadonlyArray<Hash>
  /** The whole signed note, as sent. */
  readonly note: string
}

/** Standard padded base64 of 32 bytes: 43 digits (258 bits, the last 2 unused) and one `=`. */
const HashLinePattern = /^[A-Za-z0-9+/]{43}=$/
const StdDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

/**
 * One proof line: the canonical standard base64 (padded) of 32 bytes, or undefined. Node's decoder is
 * lenient (URL-safe digits, white space, missing padding, stray bits), so the line is checked first:
 * the standard alphabet, the padding, and zero unused bits in the last digit (the one text each hash has).
 */
export const decodeHashLine = (line: string): Buffer | undefined => {
  if (!HashLinePattern.test(line) || (StdDigits.indexOf(line[42]!) & 0b11) !== 0) return undefined
  return Buffer.from(line, "base64")
}

/** The body's lines up to the blank line, then the note: 400 on anything malformed. */
export const parseAddCheckpoint = (body: string): Checked<AddCheckpointRequest> => {
  const blank = body.indexOf("\n\n")
  if (blank < 0) return refuse("the body has no blank line between the old size and proof lines and the checkpoint")
  const head = body.slice(0, blank).split("\n")
  const note = body.slice(blank + 2)
  const [oldLine, ...proofLines] = head
  if (oldLine === undefined || !oldLine.startsWith("old ")) return refuse("the first line is not `old <size>`")
  const old = oldLine.slice(4)
  if (!SizePattern.test(old) || !Number.isSafeInteger(Number(old))) return refuse("the old size is not a decimal without leading zeroes")
  if (proofLines.length > MaxProofLines) return refuse(`more than ${MaxProofLines} consistency proof lines`)
  const proof: Array<Hash> = []
  for (let i = 0; i < proofLines.length; i++) {
    const hash = decodeHashLine(proofLines[i]!)
    if (hash === undefined) return refuse(`proof line ${i + 1} is not base64 of a 32-byte hash`)
    proof.push(hash)
  }
  return accept({ oldSize: Number(old), proof, note })
}

export interface SignedCheckpoint {
  readonly checkpoint: Checkpoint
  /** The checkpoint's note text (its body, final newline included). */
  readonly text: string
  /** The trusted log's signature lines (without newline), which verified: kept with the stored checkpoint. */
  readonly logSignatureLines: ReadonlyArray<string>
}

export type SignatureCheck =
  | { readonly _tag: "Malformed"; readonly detail: string }
  | { readonly _tag: "UnknownOrigin"; readonly origin: string }
  | { readonly _tag: "Untrusted"; readonly detail: string }
  | { readonly _tag: "Signed"; readonly value: SignedCheckpoint }

/**
 * The note's origin must be a log this witness knows (else 404); at least one signature by one of its
 * trusted keys must be present, and every line naming a trusted key (name and key ID) must verify
 * (else 403). Lines by other keys are ignored.
 */
export const checkLogSignature = (note: string, trusted: ReadonlyMap<string, ReadonlyArray<NoteVerifier>>): SignatureCheck => {
  const split = splitNote(note)
  if (!split.ok) return { _tag: "Malformed", detail: split.detail }
  const checkpoint = parseCheckpoint(split.value.text)
  if (!checkpoint.ok) return { _tag: "Malformed", detail: checkpoint.detail }
  const keys = trusted.get(checkpoint.value.origin)
  if (keys === undefined) return { _tag: "UnknownOrigin", origin: checkpoint.value.origin }
  const text = split.value.text
  const bytes = Buffer.from(text, "utf8")
  const lines = note.slice(note.lastIndexOf("\n\n") + 2, -1).split("\n")
  const verified: Array<string> = []
  for (const [i, signature] of split.value.signatures.entries()) {
    const key = keys.find((k) => k.name === signature.name && hashEquals(k.keyId, signature.keyId))
    if (key === undefined) continue
    if (!key.verify(bytes, signature.signature)) return { _tag: "Untrusted", detail: `the signature by ${signature.name} does not verify` }
    verified.push(lines[i]!)
  }
  if (verified.length === 0) return { _tag: "Untrusted", detail: `the checkpoint carries no signature by a key trusted for ${checkpoint.value.origin}` }
  return { _tag: "Signed", value: { checkpoint: checkpoint.value, text, logSignatureLines: verified } }
}

/** What the witness holds for an origin: nothing yet, or the latest checkpoint it cosigned. */
export interface HeldCheckpoint {
  readonly size: number
  readonly root: Hash
}

export type Decision =
  | { readonly _tag: "BadRequest"; readonly detail: string }
  | { readonly _tag: "Conflict"; readonly heldSize: number; readonly detail: string }
  | { readonly _tag: "Unprocessable"; readonly detail: string }
  | { readonly _tag: "Cosign" }

/**
 * The checks after the signature, in the specification's order, against what is held (checked and
 * stored in one transaction by the caller):
 * - old size above the checkpoint size: 400;
 * - old size other than the held size (0 when none): 409 with the held size;
 * - the same size as held with another root: 409 with the held size too (this service's rule; the
 *   current C2SP text answers 422 there, see docs/API.md);
 * - size 0 without the empty tree's root, a proof from size 0, or a proof that does not verify: 422.
 */
export const decide = (request: AddCheckpointRequest, checkpoint: Checkpoint, held: HeldCheckpoint | undefined): Decision => {
  const heldSize = held?.size ?? 0
  if (request.oldSize > checkpoint.size) {
    return { _tag: "BadRequest", detail: `the old size ${request.oldSize} is above the checkpoint's size ${checkpoint.size}` }
  }
  if (request.oldSize !== heldSize) {
    return { _tag: "Conflict", heldSize, detail: `the old size ${request.oldSize} is not the size ${heldSize} this witness last cosigned` }
  }
  if (held !== undefined && checkpoint.size === held.size && !hashEquals(checkpoint.root, held.root)) {
    return { _tag: "Conflict", heldSize, detail: `the checkpoint has the size ${held.size} this witness cosigned, with another root hash` }
  }
  if (checkpoint.size === 0 && !hashEquals(checkpoint.root, emptyTreeHash)) {
    return { _tag: "Unprocessable", detail: "a checkpoint of size 0 must have the empty tree's root hash" }
  }
  if (request.oldSize === 0) {
    return request.proof.length === 0 ? { _tag: "Cosign" } : { _tag: "Unprocessable", detail: "a proof from size 0 must be empty" }
  }
  const consistent = verifyConsistency({
    first: request.oldSize,
    second: checkpoint.size,
    firstRoot: held!.root,
    secondRoot: checkpoint.root,
    path: request.proof
  })
  return consistent ? { _tag: "Cosign" } : { _tag: "Unprocessable", detail: `the consistency proof from size ${request.oldSize} does not verify` }
}
