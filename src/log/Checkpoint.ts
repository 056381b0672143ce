import { verifySync } from "../verify/NodeCrypto.js"
import { openCheckpoint as openCheckpointWith, type Checkpoint } from "../verify/Note.js"
import type { Checked } from "./Checked.js"
import { HashSize } from "./Merkle.js"
import { signNote, type NoteSigner, type NoteVerifier } from "./Note.js"

/**
 * C2SP tlog-checkpoint: the note text `<origin>\n<tree size>\n<base64 root hash>\n` (then optional
 * extension lines), signed by the log under a key named after the origin. Reading and verifying are
 * src/verify/Note.ts's, which the page runs too.
 */
export { parseCheckpoint, peekCheckpoint, type Checkpoint } from "../verify/Note.js"

/** The note text of a checkpoint; throws on a checkpoint that could not be parsed back. */
export const formatCheckpoint = (checkpoint: Checkpoint): string => {
  const { origin, size, root, extensions } = checkpoint
  if (origin.length === 0 || origin.includes("\n")) throw new TypeError("the origin is one non-empty line")
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError(`tree size ${size} is not a non-negative safe integer`)
  if (root.length !== HashSize) throw new TypeError("the root hash is 32 bytes")
  if (extensions.some((line) => line.length === 0 || line.includes("\n"))) throw new TypeError("extension lines are non-empty single lines")
  return [origin, String(size), Buffer.from(root).toString("base64"), ...extensions].join("\n") + "\n"
}

/** The signed checkpoint note; the log's key is named after the origin. */
export const signCheckpoint = (checkpoint: Checkpoint, signer: NoteSigner): string => {
  if (signer.name !== checkpoint.origin) throw new TypeError(`the log key is named ${signer.name}, not after the origin ${checkpoint.origin}`)
  return signNote(formatCheckpoint(checkpoint), signer)
}

/** Verifies the note with the log's key, then parses it; the origin must be the key's name. */
export const openCheckpoint = (note: unknown, verifier: NoteVerifier | string): Checked<Checkpoint> => verifySync(openCheckpointWith(note, verifier))
