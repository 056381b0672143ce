import { bytesEqual, concat, decodeStdBase64, hexOf, isWellFormed, utf8 } from "./Bytes.js"
import { accept, refuse, type Checked } from "./Checked.js"
import { ed25519Key, ed25519Verify, sha256, type Verifying } from "./Run.js"

/**
 * Reading the transparency log's signed material: C2SP signed notes with Ed25519 (type 0x01),
 * tlog-checkpoint bodies, and tlog-cosignature `cosignature/v1` lines (type 0x04) by witnesses.
 * A note is a text ending in newline, a blank line, and signature lines
 * `— <key name> <base64(4-byte key ID ‖ signature)>`; the signature covers the text with its final newline.
 */


export const Ed25519SignatureType = 0x01
export const CosignatureV1Type = 0x04

/** Verifiers refuse a cosignature dated further ahead than this (clock skew between witness and verifier). */
export const MaxFutureSkewSeconds = 60

/** Go's note package refuses more; the spec asks verifiers to accept at least 16. */
export const MaxNoteSignatures = 100

/** Em dash, space: how every signature line starts. */
export const SignatureLinePrefix = "\u2014 "

export const ControlCharacter = /[\u0000-\u0009\u000b-\u001f]/

/** A key a note or cosignature is checked with: its name, 4-byte key ID and raw 32-byte Ed25519 key. */
export interface NoteKey {
  readonly name: string
  readonly keyId: Uint8Array
  readonly publicKey: Uint8Array
}

export interface Checkpoint {
  readonly origin: string
  readonly size: number
  readonly root: Uint8Array
  readonly extensions: ReadonlyArray<string>
}

/** Key names are non-empty, without Unicode white space (Go's unicode.IsSpace) or `+`. */
export const isValidKeyName = (name: string): boolean =>
  name.length > 0 && !/[\p{White_Space}+]/u.test(name) && isWellFormed(name) && !ControlCharacter.test(name)

/** Key ID = SHA-256(key name ‖ 0x0A ‖ signature type ‖ 32-byte public key)[:4]. */
export function* keyIdOf(name: string, type: number, rawPublicKey: Uint8Array): Verifying<Uint8Array> {
  return (yield* sha256(concat(utf8(name), Uint8Array.of(0x0a, type), rawPublicKey))).subarray(0, 4)
}

const kinds = {
  [Ed25519SignatureType]: { what: "verifier key", typeName: "Ed25519 (1)", holds: "an Ed25519 verifier key" },
  [CosignatureV1Type]: { what: "witness key", typeName: "an Ed25519 cosignature/v1 key (4)", holds: "an Ed25519 witness key" }
} as const

/**
 * `<name>+<8 hex key ID>+<base64(type ‖ public key)>`, checked: name, ID, type, length and matching ID.
 * The base64 key may itself hold `+`: only the first two separate fields.
 */
export function* parseKey(verifierKey: unknown, type: typeof Ed25519SignatureType | typeof CosignatureV1Type): Verifying<Checked<NoteKey>> {
  const kind = kinds[type]
  if (typeof verifierKey !== "string") return refuse(`the ${kind.what} is not a string`)
  const first = verifierKey.indexOf("+")
  const second = verifierKey.indexOf("+", first + 1)
  if (first < 0 || second < 0) return refuse(`a ${kind.what} is <name>+<key ID>+<base64 key>`)
  const [name, id, key] = [verifierKey.slice(0, first), verifierKey.slice(first + 1, second), verifierKey.slice(second + 1)]
  if (!isValidKeyName(name)) return refuse(`${JSON.stringify(name)} is not a valid key name`)
  if (!/^[0-9a-f]{8}$/.test(id)) return refuse("the key ID is not 8 lowercase hex characters")
  const typed = decodeStdBase64(key)
  if (typed === undefined) return refuse("the key is not standard base64")
  if (typed[0] !== type) return refuse(`signature type ${typed[0] ?? "(none)"} is not ${kind.typeName}`)
  if (typed.length !== 33) return refuse(`${kind.holds} holds 32 bytes after its type`)
  const raw = typed.subarray(1)
  const keyId = yield* keyIdOf(name, type, raw)
  if (hexOf(keyId) !== id) return refuse(`key ID ${id} is not the ID of this name and key`)
  if (!(yield* ed25519Key(raw))) return refuse("the key is not a usable Ed25519 public key")
  return accept({ name, keyId, publicKey: raw })
}

/** A log's note verifier key (type 0x01). */
export const parseVerifierKey = (verifierKey: unknown): Verifying<Checked<NoteKey>> => parseKey(verifierKey, Ed25519SignatureType)

/** A witness's cosignature/v1 verifier key (type 0x04). */
export const parseCosignerKey = (verifierKey: unknown): Verifying<Checked<NoteKey>> => parseKey(verifierKey, CosignatureV1Type)

/** One signature line, parsed but not verified. */
export interface NoteSignature {
  readonly name: string
  readonly keyId: Uint8Array
  readonly signature: Uint8Array
}

/** A note split into its text and well-formed signature lines: nothing is verified yet. */
export const splitNote = (note: unknown): Checked<{ readonly text: string; readonly signatures: ReadonlyArray<NoteSignature> }> => {
  let message: string
  if (typeof note === "string") message = note
  else if (note instanceof Uint8Array) {
    try {
      message = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(note)
    } catch {
      return refuse("the note is not valid UTF-8")
    }
  } else return refuse("the note is not text")
  if (!isWellFormed(message)) return refuse("the note is not valid UTF-8")
  if (ControlCharacter.test(message)) return refuse("the note holds a control character other than newline")
  const split = message.lastIndexOf("\n\n")
  if (split < 0) return refuse("the note has no blank line before its signatures")
  const text = message.slice(0, split + 1)
  const block = message.slice(split + 2)
  if (block.length === 0 || !block.endsWith("\n")) return refuse("the signature block is empty or does not end in a newline")
  const lines = block.slice(0, -1).split("\n")
  if (lines.length > MaxNoteSignatures) return refuse(`the note has more than ${MaxNoteSignatures} signatures`)
  const signatures: Array<NoteSignature> = []
  for (const [i, line] of lines.entries()) {
    if (!line.startsWith(SignatureLinePrefix)) return refuse(`signature line ${i + 1} does not start with "— "`)
    const rest = line.slice(SignatureLinePrefix.length)
    const space = rest.indexOf(" ")
    if (space < 0) return refuse(`signature line ${i + 1} is not "— <name> <signature>"`)
    const name = rest.slice(0, space)
    const decoded = decodeStdBase64(rest.slice(space + 1))
    if (!isValidKeyName(name)) return refuse(`signature line ${i + 1} has an invalid key name`)
    if (decoded === undefined || decoded.length < 5) return refuse(`signature line ${i + 1} does not hold base64 of a key ID and a signature`)
    signatures.push({ name, keyId: decoded.subarray(0, 4), signature: decoded.subarray(4) })
  }
  return accept({ text, signatures })
}

const labelOf = (key: NoteKey) => `${key.name}+${hexOf(key.keyId)}`

/**
 * Each witness once, by name and key ID, in the order given: a key pinned twice (or listed twice in a
 * setting) counts once toward a quorum.
 */
export const distinctWitnesses = <W extends NoteKey>(witnesses: ReadonlyArray<W>): ReadonlyArray<W> => {
  const seen = new Set<string>()
  return witnesses.filter((witness) => {
    const label = labelOf(witness)
    if (seen.has(label)) return false
    seen.add(label)
    return true
  })
}

export const isNoteKey = (u: unknown): u is NoteKey =>
  typeof u === "object" && u !== null && (u as NoteKey).keyId instanceof Uint8Array && (u as NoteKey).publicKey instanceof Uint8Array

/**
 * Opens a note with one known key: signatures by other keys (another name or another key ID) are
 * ignored, every signature by the known key must verify, and at least one must be there.
 * Returns the verified text.
 */
export function* openNote(note: unknown, verifier: NoteKey | string): Verifying<Checked<string>> {
  const known = isNoteKey(verifier) ? accept(verifier) : yield* parseVerifierKey(verifier)
  if (!known.ok) return refuse(`the verifier key is not usable: ${known.detail}`)
  const split = splitNote(note)
  if (!split.ok) return split
  const { text, signatures } = split.value
  const key = known.value
  const mine = signatures.filter((s) => s.name === key.name && bytesEqual(s.keyId, key.keyId))
  if (mine.length === 0) return refuse(`the note has no signature by ${labelOf(key)}`)
  const bytes = utf8(text)
  for (const { signature } of mine) {
    if (signature.length !== 64 || !(yield* ed25519Verify(key.publicKey, bytes, signature))) {
      return refuse(`a signature by ${labelOf(key)} does not verify`)
    }
  }
  return accept(text)
}

const SizePattern = /^(0|[1-9][0-9]*)$/

/** A checkpoint from its note text: at least three lines, canonical size, 32-byte base64 root. */
export const parseCheckpoint = (text: string): Checked<Checkpoint> => {
  if (!text.endsWith("\n")) return refuse("the checkpoint does not end in a newline")
  const [origin, size, root, ...extensions] = text.slice(0, -1).split("\n")
  if (origin === undefined || size === undefined || root === undefined) return refuse("a checkpoint has at least three lines")
  if (origin.length === 0) return refuse("the origin line is empty")
  if (!SizePattern.test(size) || !Number.isSafeInteger(Number(size))) return refuse(`tree size ${JSON.stringify(size)} is not a canonical decimal`)
  const hash = decodeStdBase64(root)
  if (hash === undefined || hash.length !== 32) return refuse("the root hash is not base64 of 32 bytes")
  if (extensions.some((line) => line.length === 0)) return refuse("an extension line is empty")
  return accept({ origin, size: Number(size), root: hash, extensions })
}

/** The checkpoint a note states, before (or without) checking its signature. */
export const peekCheckpoint = (note: unknown): Checked<Checkpoint> => {
  const split = splitNote(note)
  return split.ok ? parseCheckpoint(split.value.text) : split
}

/** Verifies the note with the log's key, then parses it; the origin must be the key's name. */
export function* openCheckpoint(note: unknown, verifier: NoteKey | string): Verifying<Checked<Checkpoint>> {
  const known = isNoteKey(verifier) ? accept(verifier) : yield* parseVerifierKey(verifier)
  if (!known.ok) return refuse(`the verifier key is not usable: ${known.detail}`)
  const text = yield* openNote(note, known.value)
  if (!text.ok) return text
  const checkpoint = parseCheckpoint(text.value)
  if (!checkpoint.ok) return checkpoint
  if (checkpoint.value.origin !== known.value.name) {
    return refuse(`the checkpoint's origin ${checkpoint.value.origin} is not the key's name ${known.value.name}`)
  }
  return checkpoint
}

/** The timestamp is a u64 that must not exceed 2^63 - 1; here it also has to be a safe integer (year 285 million). */
const MaxTimestamp = BigInt(Number.MAX_SAFE_INTEGER)

/** The bytes a v1 cosignature signs: two header lines, then the checkpoint body. */
export const cosignedText = (checkpointText: string, timestamp: number): string => `cosignature/v1\ntime ${timestamp}\n${checkpointText}`

/** The timestamp and signature of a note signature's bytes after the key ID (72 bytes for cosignature/v1). */
export const parseCosignatureBytes = (bytes: Uint8Array): Checked<{ readonly timestamp: number; readonly signature: Uint8Array }> => {
  if (bytes.length !== 72) return refuse(`a cosignature/v1 holds 8 timestamp bytes and 64 signature bytes, not ${bytes.length}`)
  const stamp = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0)
  if (stamp > MaxTimestamp) return refuse(`the cosignature's timestamp ${stamp} is out of range`)
  return accept({ timestamp: Number(stamp), signature: bytes.subarray(8) })
}

/** One pinned witness's valid cosignature: the witness as it was given, and the time it cosigned. */
export interface WitnessedBy<W extends NoteKey = NoteKey> {
  readonly witness: W
  readonly timestamp: number
}

export interface CosignatureCheck<W extends NoteKey = NoteKey> {
  /** Witnesses (of those pinned) with a valid cosignature, in the order pinned. */
  readonly valid: ReadonlyArray<WitnessedBy<W>>
  /** Why a pinned witness's line was refused (it does not verify, or its time lies in the future). */
  readonly refused: ReadonlyArray<string>
}

/**
 * The pinned witnesses' cosignatures on a checkpoint note. Lines by other keys (the log's own, a
 * witness nobody pinned) are ignored, as signed-note asks. A line that names a pinned witness and its
 * key ID but does not verify, or whose time is more than `MaxFutureSkewSeconds` after `nowSeconds`, is
 * reported in `refused`: the verifier fails on it rather than counting it.
 */
export function* checkCosignatures<W extends NoteKey>(note: unknown, witnesses: ReadonlyArray<W>, nowSeconds: number): Verifying<Checked<CosignatureCheck<W>>> {
  const split = splitNote(note)
  if (!split.ok) return split
  const { text, signatures } = split.value
  const valid: Array<WitnessedBy<W>> = []
  const refused: Array<string> = []
  for (const witness of distinctWitnesses(witnesses)) {
    const label = labelOf(witness)
    let good: WitnessedBy<W> | undefined
    for (const line of signatures.filter((s) => s.name === witness.name && bytesEqual(s.keyId, witness.keyId))) {
      const parsed = parseCosignatureBytes(line.signature)
      if (!parsed.ok) {
        refused.push(`the cosignature by ${label} is malformed: ${parsed.detail}`)
        continue
      }
      const { timestamp, signature } = parsed.value
      if (!(yield* ed25519Verify(witness.publicKey, utf8(cosignedText(text, timestamp)), signature))) {
        refused.push(`the cosignature by ${label} does not verify`)
        continue
      }
      if (timestamp > nowSeconds + MaxFutureSkewSeconds) {
        refused.push(`the cosignature by ${label} is dated ${timestamp}, more than ${MaxFutureSkewSeconds} s in the future`)
        continue
      }
      good ??= { witness, timestamp }
    }
    if (good !== undefined) valid.push(good)
  }
  return accept({ valid, refused })
}

/**
 * A quorum of pinned witnesses must have cosigned the note: fails on any refused line by a pinned
 * witness, and when fewer than `quorum` distinct witnesses verify. Returns the witnesses that did.
 */
export function* requireQuorum<W extends NoteKey>(
  note: unknown,
  witnesses: ReadonlyArray<W>,
  quorum: number,
  nowSeconds: number
): Verifying<Checked<ReadonlyArray<WitnessedBy<W>>>> {
  const distinct = distinctWitnesses(witnesses)
  const checked = yield* checkCosignatures(note, distinct, nowSeconds)
  if (!checked.ok) return checked
  if (checked.value.refused.length > 0) return refuse(checked.value.refused.join("; "))
  const valid = checked.value.valid
  if (valid.length < quorum) {
    const names = valid.length === 0 ? "none" : valid.map((w) => w.witness.name).join(", ")
    return refuse(`${valid.length} of the ${distinct.length} pinned witnesses cosigned the checkpoint (${names}); the quorum is ${quorum}`)
  }
  return accept(valid)
}
