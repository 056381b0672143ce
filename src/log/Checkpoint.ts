import { accept, refuse, type Checked } from "./Checked.js"
import { HashSize, type Hash } from "./Merkle.js"
import { decodeStdBase64, openNote, parseVerifierKey, signNote, splitNote, type NoteSigner, type NoteVerifier } from "./Note.js"

/**
 * C2SP tlog-checkpoint: the note text `<origin>\n<tree size>\n<base64 root hash>\n` (then optional
 * extension lines), signed by the log under a key named after the origin.
 */
export interface Checkpoint {
  readonly origin: string
  readonly size: number
  readonly root: Hash
  readonly extensions: ReadonlyArray<string>
}

const SizePattern = /^(0|[1-9][0-9]*)$/

/** The note text of a checkpoint; throws on a checkpoint that could not be parsed back. */
export const formatCheckpoint = (checkpoint: Checkpoint): string => {
  const { origin, size, root, extensions } = checkpoint
  if (origin.length === 0 || origin.includes("\n")) throw new TypeError("the origin is one non-empty line")
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError(`tree size ${size} is not a non-negative safe integer`)
  if (root.length !== HashSize) throw new TypeError("the root hash is 32 bytes")
  if (extensions.some((line) => line.length === 0 || line.includes("\n"))) throw new TypeError("extension lines are non-empty single lines")
  return [origin, String(size), Buffer.from(root).toString("base64"), ...extensions].join("\n") + "\n"
}

/** A checkpoint from its note text: at least three lines, canonical size, 32-byte base64 root. */
export const parseCheckpoint = (text: string): Checked<Checkpoint> => {
  if (!text.endsWith("\n")) return refuse("the checkpoint does not end in a newline")
  const lines = text.slice(0, -1).split("\n")
  const [origin, size, root, ...extensions] = lines
  if (origin === undefined || size === undefined || root === undefined) return refuse("a checkpoint has at least three lines")
  if (origin.length === 0) return refuse("the origin line is empty")
  if (!SizePattern.test(size) || !Number.isSafeInteger(Number(size))) return refuse(`tree size ${JSON.stringify(size)} is not a canonical decimal`)
  const hash = decodeStdBase64(root)
  if (hash === undefined || hash.length !== HashSize) return refuse("the root hash is not base64 of 32 bytes")
  if (extensions.some((line) => line.length === 0)) return refuse("an extension line is empty")
  return accept({ origin, size: Number(size), root: hash, extensions })
}

/** The signed checkpoint note; the log's key is named after the origin. */
export const signCheckpoint = (checkpoint: Checkpoint, signer: NoteSigner): string => {
  if (signer.name !== checkpoint.origin) throw new TypeError(`the log key is named ${signer.name}, not after the origin ${checkpoint.origin}`)
  return signNote(formatCheckpoint(checkpoint), signer)
}

/** Verifies the note with the log's key, then parses it; the origin must be the key's name. */
export const openCheckpoint = (note: unknown, verifier: NoteVerifier | string): Checked<Checkpoint> => {
  const known = typeof verifier === "string" ? parseVerifierKey(verifier) : accept(verifier)
  if (!known.ok) return refuse(`the verifier key is not usable: ${known.detail}`)
  const text = openNote(note, known.value)
  if (!text.ok) return text
  const checkpoint = parseCheckpoint(text.value)
  if (!checkpoint.ok) return checkpoint
  if (checkpoint.value.origin !== known.value.name) {
    return refuse(`the checkpoint's origin ${checkpoint.value.origin} is not the key's name ${known.value.name}`)
  }
  return checkpoint
}

/** The checkpoint a note states, before (or without) checking its signature. */
export const peekCheckpoint = (note: unknown): Checked<Checkpoint> => {
  const split = splitNote(note)
  return split.ok ? parseCheckpoint(split.value.text) : split
}
