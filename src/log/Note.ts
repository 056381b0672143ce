import { createPublicKey, sign, verify, type KeyObject } from "node:crypto"
import { rawPublicKeyOf, verifySync } from "../verify/NodeCrypto.js"
import {
  ControlCharacter,
  Ed25519SignatureType,
  isValidKeyName,
  keyIdOf,
  openNote as openNoteWith,
  parseVerifierKey as parseKey,
  SignatureLinePrefix
} from "../verify/Note.js"
import { isWellFormed } from "../verify/Bytes.js"
import { accept, refuse, type Checked } from "./Checked.js"

/**
 * C2SP signed-note with Ed25519 (signature type 0x01): a text ending in newline, a blank line, and
 * signature lines `— <key name> <base64(4-byte key ID ‖ signature)>`. The signature covers the text
 * including its final newline. Signing is here; reading and verifying are src/verify/Note.ts's (the
 * page runs the same code), wrapped with node:crypto.
 */
export { decodeStdBase64 } from "../verify/Bytes.js"
export { Ed25519SignatureType, isValidKeyName, MaxNoteSignatures, splitNote, type NoteSignature } from "../verify/Note.js"

/** SPKI DER of an Ed25519 public key is this fixed prefix followed by the 32 raw bytes. */
const spkiEd25519Prefix = Buffer.from("302a300506032b6570032100", "hex")

export interface NoteSigner {
  readonly name: string
  /** The 4-byte key ID. */
  readonly keyId: Uint8Array
  /** Ed25519 over the note text bytes: 64 bytes. */
  readonly sign: (text: Uint8Array) => Uint8Array
}

export interface NoteVerifier {
  readonly name: string
  readonly keyId: Uint8Array
  /** The raw 32-byte Ed25519 public key. */
  readonly publicKey: Uint8Array
  readonly verify: (text: Uint8Array, signature: Uint8Array) => boolean
}

/** Key ID = SHA-256(key name ‖ 0x0A ‖ 0x01 ‖ 32-byte Ed25519 public key)[:4]. */
export const noteKeyId = (name: string, rawPublicKey: Uint8Array): Uint8Array => verifySync(keyIdOf(name, Ed25519SignatureType, rawPublicKey))

export { rawPublicKeyOf }

export const publicKeyFromRaw = (raw: Uint8Array): KeyObject => {
  if (raw.length !== 32) throw new TypeError("an Ed25519 public key is 32 bytes")
  return createPublicKey({ key: Buffer.concat([spkiEd25519Prefix, raw]), format: "der", type: "spki" })
}

export const noteSignerFromPrivateKey = (name: string, privateKey: KeyObject): NoteSigner => {
  if (privateKey.asymmetricKeyType !== "ed25519") throw new TypeError("a note signing key must be Ed25519")
  if (!isValidKeyName(name)) throw new TypeError(`${JSON.stringify(name)} is not a valid note key name`)
  return {
    name,
    keyId: noteKeyId(name, rawPublicKeyOf(privateKey)),
    sign: (text) => sign(null, text, privateKey)
  }
}

const noteVerifierOf = (name: string, raw: Uint8Array): NoteVerifier => {
  const key = publicKeyFromRaw(raw)
  return {
    name,
    keyId: noteKeyId(name, raw),
    publicKey: raw,
    verify: (text, signature) => {
      try {
        return signature.length === 64 && verify(null, text, key, signature)
      } catch {
        return false
      }
    }
  }
}

/** `<name>+<8 hex key ID>+<base64(0x01 ‖ public key)>`: how a relying party pins a log key. */
export const verifierKeyOf = (name: string, rawPublicKey: Uint8Array): string => {
  if (!isValidKeyName(name)) throw new TypeError(`${JSON.stringify(name)} is not a valid note key name`)
  if (rawPublicKey.length !== 32) throw new TypeError("an Ed25519 public key is 32 bytes")
  const typed = Buffer.concat([Uint8Array.of(Ed25519SignatureType), rawPublicKey])
  return `${name}+${Buffer.from(noteKeyId(name, rawPublicKey)).toString("hex")}+${typed.toString("base64")}`
}

export const verifierKeyOfSigner = (name: string, privateKey: KeyObject): string => verifierKeyOf(name, rawPublicKeyOf(privateKey))

/** Parses and checks a verifier key: name, key ID (8 lowercase hex), type 0x01, 32-byte key, matching ID. */
export const parseVerifierKey = (verifierKey: unknown): Checked<NoteVerifier> => {
  const parsed = verifySync(parseKey(verifierKey))
  if (!parsed.ok) return parsed
  try {
    return accept(noteVerifierOf(parsed.value.name, Buffer.from(parsed.value.publicKey)))
  } catch {
    return refuse("the key is not a usable Ed25519 public key")
  }
}

/** Note texts are non-empty, end in newline, and hold no control character but newline. */
const textProblem = (text: string): string | undefined => {
  if (!isWellFormed(text)) return "the note is not valid UTF-8"
  if (ControlCharacter.test(text)) return "the note holds a control character other than newline"
  if (text.length === 0 || !text.endsWith("\n")) return "the note text does not end in a newline"
  return undefined
}

/** `text` ‖ blank line ‖ one signature line per signer. */
export const signNote = (text: string, signers: NoteSigner | ReadonlyArray<NoteSigner>): string => {
  const problem = textProblem(text)
  if (problem !== undefined) throw new TypeError(problem)
  const list = Array.isArray(signers) ? signers as ReadonlyArray<NoteSigner> : [signers as NoteSigner]
  if (list.length === 0) throw new TypeError("a signed note needs a signer")
  const bytes = Buffer.from(text, "utf8")
  const lines = list.map((signer) => {
    if (!isValidKeyName(signer.name) || signer.keyId.length !== 4) throw new TypeError(`signer ${JSON.stringify(signer.name)} is not valid`)
    const signature = Buffer.concat([signer.keyId, signer.sign(bytes)]).toString("base64")
    return `${SignatureLinePrefix}${signer.name} ${signature}\n`
  })
  return `${text}\n${lines.join("")}`
}

/**
 * Opens a note with one known key: signatures by other keys (another name or another key ID) are
 * ignored, every signature by the known key must verify, and at least one must be there.
 * Returns the verified text.
 */
export const openNote = (note: unknown, verifier: NoteVerifier | string): Checked<string> => verifySync(openNoteWith(note, verifier))
