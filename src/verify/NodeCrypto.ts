import { createPublicKey, hash, verify, type KeyObject } from "node:crypto"
import { HexHashPattern, isSignatureText } from "./Bytes.js"
import { runSync, type SyncCrypto, type Verifying } from "./Run.js"

/** SPKI DER of an Ed25519 public key is this fixed prefix followed by the 32 raw bytes. */
const spkiEd25519Prefix = Buffer.from("302a300506032b6570032100", "hex")

/**
 * Imported keys, so a chain signed by one key imports it once: by the array a verifier holds (every
 * event of a chain passes the same one), then by value, bounded, since input chooses keys.
 */
const importedArrays = new WeakMap<Uint8Array, KeyObject | null>()
const imported = new Map<string, KeyObject | null>()
const MaxImported = 256

const keyOf = (raw: Uint8Array): KeyObject | null => {
  const held = importedArrays.get(raw)
  if (held !== undefined) return held
  const id = Buffer.from(raw.buffer, raw.byteOffset, raw.length).toString("hex")
  let key = imported.get(id)
  if (key === undefined) {
    try {
      key = raw.length === 32 ? createPublicKey({ key: Buffer.concat([spkiEd25519Prefix, raw]), format: "der", type: "spki" }) : null
    } catch {
      key = null
    }
    if (imported.size >= MaxImported) imported.clear()
    imported.set(id, key)
  }
  importedArrays.set(raw, key)
  return key
}

const verifyWith = (raw: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean => {
  const key = keyOf(raw)
  if (key === null || signature.length !== 64) return false
  try {
    return verify(null, message, key, signature)
  } catch {
    return false
  }
}

// An event's signature and hash decoded into these (verify is synchronous, so one pair serves every event):
// no allocation per event.
const signatureBuffer = Buffer.alloc(64)
const hashBuffer = Buffer.alloc(32)

/** node:crypto, synchronous: what the client module (src/client) and the service run the verifiers with. */
export const nodeCrypto: SyncCrypto = {
  // One-shot: no Hash object per call (most calls hash one event).
  sha256: (data) => hash("sha256", data, "buffer"),
  ed25519Key: (raw) => keyOf(raw) !== null,
  ed25519Verify: verifyWith,
  // Node's own UTF-8 and hex, one shot.
  sha256Text: (text) => hash("sha256", text, "hex"),
  // The texts are held to the portable decoders' canonical forms first, then Buffer's decoders (lenient) fill the buffers.
  ed25519VerifyText: (raw, hashHex, sig) =>
    HexHashPattern.test(hashHex) && isSignatureText(sig) && hashBuffer.write(hashHex, "hex") === 32 &&
    signatureBuffer.write(sig, "base64url") === 64 && verifyWith(raw, hashBuffer, signatureBuffer)
}

/** Runs a verifier with node:crypto. */
export const verifySync = <A>(program: Verifying<A>): A => runSync(program, nodeCrypto)

/** The raw 32 bytes of an Ed25519 key's public half (given the private key or the public one). */
export const rawPublicKeyOf = (key: KeyObject): Buffer =>
  Buffer.from(createPublicKey(key).export({ format: "jwk" }).x as string, "base64url")
