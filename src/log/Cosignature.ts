import { sign, verify, type KeyObject } from "node:crypto"
import { verifySync } from "../verify/NodeCrypto.js"
import {
  checkCosignatures as checkCosignaturesWith,
  CosignatureV1Type,
  keyIdOf,
  parseCosignatureBytes,
  parseCosignerKey as parseKey,
  requireQuorum as requireQuorumWith
} from "../verify/Note.js"
import { bytesEqual } from "../verify/Bytes.js"
import { accept, refuse, type Checked } from "./Checked.js"
import { isValidKeyName, publicKeyFromRaw, rawPublicKeyOf, splitNote } from "./Note.js"

/**
 * C2SP tlog-cosignature, the Ed25519 `cosignature/v1` type: a witness's note signature line on a
 * checkpoint, `— <witness name> base64(key ID ‖ u64 big-endian timestamp ‖ Ed25519 signature)`, where
 * the signature covers `cosignature/v1\ntime <timestamp>\n` followed by the checkpoint's note text
 * (its body with the final newline, no signature lines). Key ID = SHA-256(name ‖ 0x0A ‖ 0x04 ‖ key)[:4];
 * the verifier key is `<name>+<8 hex key ID>+base64(0x04 ‖ key)`. Cosigning is here; reading and
 * checking cosignatures are src/verify/Note.ts's (the page runs the same code), wrapped with node:crypto.
 */
export { CosignatureV1Type, MaxFutureSkewSeconds, parseCosignatureBytes } from "../verify/Note.js"

const SignatureLinePrefix = "\u2014 "

export const cosignatureKeyId = (name: string, rawPublicKey: Uint8Array): Uint8Array => verifySync(keyIdOf(name, CosignatureV1Type, rawPublicKey))

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
  const parsed = verifySync(parseKey(verifierKey))
  if (!parsed.ok) return parsed
  try {
    return accept(verifierOf(parsed.value.name, Buffer.from(parsed.value.publicKey)))
  } catch {
    return refuse("the key is not a usable Ed25519 public key")
  }
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

const witnessedBy = ({ witness, timestamp }: { readonly witness: CosignatureVerifier; readonly timestamp: number }): WitnessedBy =>
  ({ name: witness.name, verifierKey: witness.verifierKey, timestamp })

/**
 * The pinned witnesses' cosignatures on a checkpoint note. Lines by other keys (the log's own, a
 * witness nobody pinned) are ignored, as signed-note asks. A line that names a pinned witness and its
 * key ID but does not verify, or whose time is more than `MaxFutureSkewSeconds` after `nowSeconds`, is
 * reported in `refused`: the verifier fails on it rather than counting it.
 */
export const checkCosignatures = (note: unknown, witnesses: ReadonlyArray<CosignatureVerifier>, nowSeconds: number): Checked<CosignatureCheck> => {
  const checked = verifySync(checkCosignaturesWith(note, witnesses, nowSeconds))
  return checked.ok ? accept({ valid: checked.value.valid.map(witnessedBy), refused: checked.value.refused }) : checked
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
  const checked = verifySync(requireQuorumWith(note, witnesses, quorum, nowSeconds))
  return checked.ok ? accept(checked.value.map(witnessedBy)) : checked
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
    if (signature.name !== witness.name || !bytesEqual(signature.keyId, witness.keyId)) continue
    const parsed = parseCosignatureBytes(signature.signature)
    if (!parsed.ok) return refuse(parsed.detail)
    if (!witness.verify(checkpointText, parsed.value.timestamp, parsed.value.signature)) return refuse("its cosignature does not verify")
    found ??= { line: lines[i]!, timestamp: parsed.value.timestamp }
  }
  if (found === undefined) return refuse(`the answer holds no cosignature by ${witness.name}+${hex(witness.keyId)}`)
  return accept({ lines: [found.line], timestamp: found.timestamp })
}
