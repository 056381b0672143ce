import { createHash, createPublicKey, sign, verify, type KeyObject } from "node:crypto"
import { accept, refuse, type Checked } from "./Checked.js"

/**
 * C2SP signed-note with Ed25519 (signature type 0x01): a text ending in newline, a blank line, and
 * signature lines `— <key name> <base64(4-byte key ID ‖ signature)>`. The signature covers the text
 * including its final newline.
 */
export const Ed25519SignatureType = 0x01

/** Em dash, space: how every signature line starts. */
const SignatureLinePrefix = "\u2014 "

/** Go's note package refuses more; the spec asks verifiers to accept at least 16. */
export const MaxNoteSignatures = 100

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

/** UTF-16 with no lone surrogate, so the text has a UTF-8 form. */
const isWellFormed = (text: string): boolean =>
  !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text)

const ControlCharacter = /[\u0000-\u0009\u000b-\u001f]/

/** Key names are non-empty, without Unicode white space (Go's unicode.IsSpace) or `+`. */
export const isValidKeyName = (name: string): boolean =>
  name.length > 0 && !/[\p{White_Space}+]/u.test(name) && isWellFormed(name) && !ControlCharacter.test(name)

/** Key ID = SHA-256(key name ‖ 0x0A ‖ 0x01 ‖ 32-byte Ed25519 public key)[:4]. */
export const noteKeyId = (name: string, rawPublicKey: Uint8Array): Uint8Array =>
  createHash("sha256").update(name, "utf8").update(Uint8Array.of(0x0a, Ed25519SignatureType)).update(rawPublicKey).digest().subarray(0, 4)

export const rawPublicKeyOf = (privateKey: KeyObject): Buffer =>
  Buffer.from(createPublicKey(privateKey).export({ format: "jwk" }).x as string, "base64url")

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

const StdBase64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Standard base64 with padding, canonical only (the unused bits of the last character are zero). */
export const decodeStdBase64 = (text: string): Uint8Array | undefined => {
  if (!StdBase64Pattern.test(text)) return undefined
  const bytes = Buffer.from(text, "base64")
  return bytes.toString("base64") === text ? bytes : undefined
}

/** Parses and checks a verifier key: name, key ID (8 lowercase hex), type 0x01, 32-byte key, matching ID. */
export const parseVerifierKey = (verifierKey: unknown): Checked<NoteVerifier> => {
  if (typeof verifierKey !== "string") return refuse("the verifier key is not a string")
  // The base64 key may itself hold `+`: only the first two separate fields.
  const first = verifierKey.indexOf("+")
  const second = verifierKey.indexOf("+", first + 1)
  if (first < 0 || second < 0) return refuse("a verifier key is <name>+<key ID>+<base64 key>")
  const [name, id, key] = [verifierKey.slice(0, first), verifierKey.slice(first + 1, second), verifierKey.slice(second + 1)]
  if (!isValidKeyName(name)) return refuse(`${JSON.stringify(name)} is not a valid key name`)
  if (!/^[0-9a-f]{8}$/.test(id)) return refuse("the key ID is not 8 lowercase hex characters")
  const typed = decodeStdBase64(key)
  if (typed === undefined) return refuse("the key is not standard base64")
  if (typed[0] !== Ed25519SignatureType) return refuse(`signature type ${typed[0] ?? "(none)"} is not Ed25519 (1)`)
  if (typed.length !== 33) return refuse("an Ed25519 verifier key holds 32 bytes after its type")
  const raw = typed.subarray(1)
  if (Buffer.from(noteKeyId(name, raw)).toString("hex") !== id) return refuse(`key ID ${id} is not the ID of this name and key`)
  try {
    return accept(noteVerifierOf(name, raw))
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

const sameId = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b))

/**
 * Opens a note with one known key: signatures by other keys (another name or another key ID) are
 * ignored, every signature by the known key must verify, and at least one must be there.
 * Returns the verified text.
 */
export const openNote = (note: unknown, verifier: NoteVerifier | string): Checked<string> => {
  const known = typeof verifier === "string" ? parseVerifierKey(verifier) : accept(verifier)
  if (!known.ok) return refuse(`the verifier key is not usable: ${known.detail}`)
  const split = splitNote(note)
  if (!split.ok) return split
  const { text, signatures } = split.value
  const textBytes = Buffer.from(text, "utf8")
  const mine = signatures.filter((s) => s.name === known.value.name && sameId(s.keyId, known.value.keyId))
  if (mine.length === 0) return refuse(`the note has no signature by ${known.value.name}+${Buffer.from(known.value.keyId).toString("hex")}`)
  for (const signature of mine) {
    if (!known.value.verify(textBytes, signature.signature)) {
      return refuse(`a signature by ${known.value.name}+${Buffer.from(known.value.keyId).toString("hex")} does not verify`)
    }
  }
  return accept(text)
}
