import { createHash, sign, verify, type KeyObject } from "node:crypto"
import { accept, refuse, type Checked } from "./Checked.js"
import { decodeStdBase64, isValidKeyName, publicKeyFromRaw, rawPublicKeyOf, splitNote } from "./Note.js"

/**
 * C2SP tlog-cosignature, the Ed25519 `cosignature/v1` type: a witness's note signature line on a
 * checkpoint, `— <witness name> base64(key ID ‖ u64 big-endian timestamp ‖ Ed25519 signature)`, where
 * the signature covers `cosignature/v1\ntime <timestamp>\n` followed by the checkpoint's note text
 * (its body with the final newline, no signature lines). Key ID = SHA-256(name ‖ 0x0A ‖ 0x04 ‖ key)[:4];
 * the verifier key is `<name>+<8 hex key ID>+base64(0x04 ‖ key)`.
 */
export const CosignatureV1Type = 0x04

/** Verifiers refuse a cosignature dated further ahead than this (clock skew between witness and verifier). */
export const MaxFutureSkewSeconds = 60

/** The timestamp is a u64 that must not exceed 2^63 - 1; here it also has to be a safe integer (year 285 million). */
const MaxTimestamp = Number.MAX_SAFE_INTEGER

const SignatureLinePrefix = "\u2014 "

export const cosignatureKeyId = (name: string, rawPublicKey: Uint8Array): Uint8Array =>
  createHash("sha256").update(name, "utf8").update(Uint8Array.of(0x0a, CosignatureV1Type)).update(rawPublicKey).digest().subarray(0, 4)

/** The bytes a v1 cosignature signs: two header lines, then the checkpoint body. */
export const cosignedMessage = (checkpointText: string, timestamp: number): Buffer => {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new RangeError(`timestamp ${timestamp} is not a non-negative safe integer`)
  return Buffer.from(`cosignature/v1\ntime ${timestamp}\n${checkpointText}`, "utf8")
}

export interface Cosigner {
  readonly name: string
  readonly keyId: Uint8Array
  readonly publicKey: Uint8Array
  readonly verifierKey: string
  /** One signature line (ending in newline) over `checkpointText` at `timestamp` (POSIX seconds, > 0). */
  readonly cosign: (checkpointText: string, timestamp: number) => string
}

export interface CosignatureVerifier {
  readonly name: string
  readonly keyId: Uint8Array
  readonly publicKey: Uint8Array
  readonly verifierKey: string
  readonly verify: (checkpointText: string, timestamp: number, signature: Uint8Array) => boolean
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")

/** `<name>+<key ID>+base64(0x04 ‖ key)`. */
export const cosignerVerifierKeyOf = (name: string, rawPublicKey: Uint8Array): string => {
  if (!isValidKeyName(name)) throw new TypeError(`${JSON.stringify(name)} is not a valid note key name`)
  if (rawPublicKey.length !== 32) throw new TypeError("an Ed25519 public key is 32 bytes")
  const typed = Buffer.concat([Uint8Array.of(CosignatureV1Type), rawPublicKey])
  return `${name}+${hex(cosignatureKeyId(name, rawPublicKey))}+${typed.toString("base64")}`
}

/** The line for a signature already made: `— <name> base64(key ID ‖ timestamp ‖ signature)\n`. */
export const formatCosignatureLine = (name: string, keyId: Uint8Array, timestamp: number, signature: Uint8Array): string => {
  const stamp = Buffer.alloc(8)
  stamp.writeBigUInt64BE(BigInt(timestamp))
  return `${SignatureLinePrefix}${name} ${Buffer.concat([keyId, stamp, signature]).toString("base64")}\n`
}

export const cosignerFromPrivateKey = (name: string, privateKey: KeyObject): Cosigner => {
  if (privateKey.asymmetricKeyType !== "ed25519") throw new TypeError("a cosigning key must be Ed25519")
  if (!isValidKeyName(name)) throw new TypeError(`${JSON.stringify(name)} is not a valid note key name`)
  const publicKey = rawPublicKeyOf(privateKey)
  const keyId = cosignatureKeyId(name, publicKey)
  return {
    name,
    keyId,
    publicKey,
    verifierKey: cosignerVerifierKeyOf(name, publicKey),
    cosign: (checkpointText, timestamp) => {
      // The spec forbids a zero timestamp in a witness's answer.
      if (!Number.isSafeInteger(timestamp) || timestamp <= 0) throw new RangeError(`timestamp ${timestamp} is not a positive safe integer`)
      return formatCosignatureLine(name, keyId, timestamp, sign(null, cosignedMessage(checkpointText, timestamp), privateKey))
    }
  }
}

const verifierOf = (name: string, raw: Uint8Array): CosignatureVerifier => {
  const key = publicKeyFromRaw(raw)
  return {
    name,
    keyId: cosignatureKeyId(name, raw),
    publicKey: raw,
    verifierKey: cosignerVerifierKeyOf(name, raw),
    verify: (checkpointText, timestamp, signature) => {
      try {
        return signature.length === 64 && verify(null, cosignedMessage(checkpointText, timestamp), key, signature)
      } catch {
        return false
      }
    }
  }
}

/** Parses a witness verifier key: name, 8 lowercase hex key ID, type 0x04, 32-byte key, matching ID. */
export const parseCosignerKey = (verifierKey: unknown): Checked<CosignatureVerifier> => {
  if (typeof verifierKey !== "string") return refuse("the witness key is not a string")
  const first = verifierKey.indexOf("+")
  const second = verifierKey.indexOf("+", first + 1)
  if (first < 0 || second < 0) return refuse("a witness key is <name>+<key ID>+<base64 key>")
  const [name, id, key] = [verifierKey.slice(0, first), verifierKey.slice(first + 1, second), verifierKey.slice(second + 1)]
  if (!isValidKeyName(name)) return refuse(`${JSON.stringify(name)} is not a valid key name`)
  if (!/^[0-9a-f]{8}$/.test(id)) return refuse("the key ID is not 8 lowercase hex characters")
  const typed = decodeStdBase64(key)
  if (typed === undefined) return refuse("the key is not standard base64")
  if (typed[0] !== CosignatureV1Type) return refuse(`signature type ${typed[0] ?? "(none)"} is not an Ed25519 cosignature/v1 key (4)`)
  if (typed.length !== 33) return refuse("an Ed25519 witness key holds 32 bytes after its type")
  const raw = typed.subarray(1)
  if (hex(cosignatureKeyId(name, raw)) !== id) return refuse(`key ID ${id} is not the ID of this name and key`)
  try {
    return accept(verifierOf(name, raw))
  } catch {
    return refuse("the key is not a usable Ed25519 public key")
  }
}

/** A cosignature's parts: 4-byte key ID, then (in the signature bytes a note line carries) timestamp and signature. */
export interface ParsedCosignature {
  readonly timestamp: number
  readonly signature: Uint8Array
}

/** The timestamp and signature of a note signature's bytes after the key ID (72 bytes for cosignature/v1). */
export const parseCosignatureBytes = (bytes: Uint8Array): Checked<ParsedCosignature> => {
  if (bytes.length !== 72) return refuse(`a cosignature/v1 holds 8 timestamp bytes and 64 signature bytes, not ${bytes.length}`)
  const stamp = Buffer.from(bytes.subarray(0, 8)).readBigUInt64BE()
  if (stamp > BigInt(MaxTimestamp)) return refuse(`the cosignature's timestamp ${stamp} is out of range`)
  return accept({ timestamp: Number(stamp), signature: bytes.subarray(8) })
}

/** One pinned witness's valid cosignature. */
export interface WitnessedBy {
  readonly name: string
  readonly verifierKey: string
  readonly timestamp: number
}

export interface CosignatureCheck {
  /** Witnesses (of those pinned) with a valid cosignature, in the order pinned. */
  readonly valid: ReadonlyArray<WitnessedBy>
  /** Why a pinned witness's line was refused (it does not verify, or its time lies in the future). */
  readonly refused: ReadonlyArray<string>
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b))

/**
 * The pinned witnesses' cosignatures on a checkpoint note. Lines by other keys (the log's own, a
 * witness nobody pinned) are ignored, as signed-note asks. A line that names a pinned witness and its
 * key ID but does not verify, or whose time is more than `MaxFutureSkewSeconds` after `nowSeconds`, is
 * reported in `refused`: the verifier fails on it rather than counting it.
 */
export const checkCosignatures = (note: unknown, witnesses: ReadonlyArray<CosignatureVerifier>, nowSeconds: number): Checked<CosignatureCheck> => {
  const split = splitNote(note)
  if (!split.ok) return split
  const { text, signatures } = split.value
  const valid: Array<WitnessedBy> = []
  const refused: Array<string> = []
  for (const witness of witnesses) {
    const label = `${witness.name}+${hex(witness.keyId)}`
    const lines = signatures.filter((s) => s.name === witness.name && sameBytes(s.keyId, witness.keyId))
    let good: WitnessedBy | undefined
    for (const line of lines) {
      const parsed = parseCosignatureBytes(line.signature)
      if (!parsed.ok) {
        refused.push(`the cosignature by ${label} is malformed: ${parsed.detail}`)
        continue
      }
      if (!witness.verify(text, parsed.value.timestamp, parsed.value.signature)) {
        refused.push(`the cosignature by ${label} does not verify`)
        continue
      }
      if (parsed.value.timestamp > nowSeconds + MaxFutureSkewSeconds) {
        refused.push(`the cosignature by ${label} is dated ${parsed.value.timestamp}, more than ${MaxFutureSkewSeconds} s in the future`)
        continue
      }
      good ??= { name: witness.name, verifierKey: witness.verifierKey, timestamp: parsed.value.timestamp }
    }
    if (good !== undefined) valid.push(good)
  }
  return accept({ valid, refused })
}

/**
 * A quorum of pinned witnesses must have cosigned the note: fails on any refused line by a pinned
 * witness, and when fewer than `quorum` verify. Returns the witnesses that did.
 */
export const requireQuorum = (
  note: unknown,
  witnesses: ReadonlyArray<CosignatureVerifier>,
  quorum: number,
  nowSeconds: number
): Checked<ReadonlyArray<WitnessedBy>> => {
  const checked = checkCosignatures(note, witnesses, nowSeconds)
  if (!checked.ok) return checked
  if (checked.value.refused.length > 0) return refuse(checked.value.refused.join("; "))
  const valid = checked.value.valid
  if (valid.length < quorum) {
    const names = valid.length === 0 ? "none" : valid.map((w) => w.name).join(", ")
    return refuse(`${valid.length} of the ${witnesses.length} pinned witnesses cosigned the checkpoint (${names}); the quorum is ${quorum}`)
  }
  return accept(valid)
}

/**
 * A note with signature lines added after its own (a witness's answer to add-checkpoint). Each line
 * must be one well-formed signature line; duplicates of lines already there are dropped.
 */
export const appendSignatureLines = (note: string, lines: ReadonlyArray<string>): string => {
  const present = new Set(note.slice(note.lastIndexOf("\n\n") + 2).split("\n"))
  const added = lines.map((line) => line.endsWith("\n") ? line.slice(0, -1) : line).filter((line) => !present.has(line))
  for (const line of added) {
    if (!line.startsWith(SignatureLinePrefix) || line.includes("\n")) throw new TypeError("not a signature line")
  }
  return note + added.map((line) => `${line}\n`).join("")
}

/**
 * The cosignature lines a witness answered to add-checkpoint (one or more `— ` lines, each ending in
 * newline), kept only when they are the named witness's and verify on `checkpointText`.
 */
export const cosignatureLinesOf = (
  body: string,
  witness: CosignatureVerifier,
  checkpointText: string
): Checked<{ readonly lines: ReadonlyArray<string>; readonly timestamp: number }> => {
  if (!body.endsWith("\n")) return refuse("the answer does not end in a newline")
  const lines = body.slice(0, -1).split("\n")
  const split = splitNote(`${checkpointText}\n${body}`)
  if (!split.ok) return refuse(`the answer is not signature lines: ${split.detail}`)
  let found: { line: string; timestamp: number } | undefined
  for (const [i, signature] of split.value.signatures.entries()) {
    if (signature.name !== witness.name || !sameBytes(signature.keyId, witness.keyId)) continue
    const parsed = parseCosignatureBytes(signature.signature)
    if (!parsed.ok) return refuse(parsed.detail)
    if (!witness.verify(checkpointText, parsed.value.timestamp, parsed.value.signature)) return refuse("its cosignature does not verify")
    found ??= { line: lines[i]!, timestamp: parsed.value.timestamp }
  }
  if (found === undefined) return refuse(`the answer holds no cosignature by ${witness.name}+${hex(witness.keyId)}`)
  return accept({ lines: [found.line], timestamp: found.timestamp })
}
