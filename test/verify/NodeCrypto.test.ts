import { createHash, generateKeyPairSync, sign } from "node:crypto"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { isSignatureText, signatureBytes } from "../../src/verify/Bytes.js"
import { nodeCrypto } from "../../src/verify/NodeCrypto.js"
import { eventCheck, runSync, type EventAnswer, type SyncCrypto, type Verifying } from "../../src/verify/Run.js"

/**
 * node:crypto's event fast path (SHA-256 of the text to hex, the signature and hash decoded from their
 * texts by Buffer into reused buffers) against the runner's composition of the three primitives with
 * the portable codecs: the same answer for every text, including non-canonical base64url and hex.
 */
const { publicKey, privateKey } = generateKeyPairSync("ed25519")
const raw = new Uint8Array(publicKey.export({ format: "der", type: "spki" }).subarray(12))
const primitivesOnly: SyncCrypto = { sha256: nodeCrypto.sha256, ed25519Key: nodeCrypto.ed25519Key, ed25519Verify: nodeCrypto.ed25519Verify }

function* ask(op: ReturnType<typeof eventCheck>): Verifying<EventAnswer> {
  return (yield op) as EventAnswer
}

const answers = (text: string, key: Uint8Array | undefined, hash: string, signature: string) => {
  const op = eventCheck(text, key, hash, signature)
  return [runSync(ask(op), nodeCrypto), runSync(ask(op), primitivesOnly)] as const
}

// A signature text: the canonical one of a real signature, or that one with a character or the length changed.
const signatureEdits = fc.oneof(
  fc.constant((sig: string) => sig),
  fc.tuple(fc.nat(90), fc.constantFrom(..."AEQgBCDw_-+/=. ")).map(([at, char]) => (sig: string) => sig.slice(0, at % 87) + char + sig.slice(at % 87 + 1)),
  fc.nat(3).map((n) => (sig: string) => sig.slice(0, 86 - n)),
  fc.constant((sig: string) => sig + "=="),
  fc.constant((sig: string) => Buffer.from(sig, "base64url").toString("base64"))
)
const hashEdits = fc.oneof(
  fc.constant((hex: string) => hex),
  fc.constant((hex: string) => hex.toUpperCase()),
  fc.constant((hex: string) => hex.slice(1)),
  fc.constant((hex: string) => hex.slice(0, 63) + "g")
)

describe("src/verify/NodeCrypto.ts event fast path", () => {
  it("answers as the portable composition (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 40 }), fc.uint8Array({ minLength: 32, maxLength: 32 }), signatureEdits, hashEdits, fc.boolean(),
        (text, digest, editSig, editHash, withKey) => {
          const hex = Buffer.from(digest).toString("hex")
          const sig = sign(null, digest, privateKey).toString("base64url")
          const [fast, portable] = answers(text, withKey ? raw : undefined, editHash(hex), editSig(sig))
          expect(fast).toEqual(portable)
          expect(fast.hash).toBe(createHash("sha256").update(text, "utf8").digest("hex"))
          expect(isSignatureText(editSig(sig))).toBe(signatureBytes(editSig(sig)) !== undefined)
        }),
      { numRuns: 1000 }
    )
    const digest = new Uint8Array(32).fill(7)
    const hex = Buffer.from(digest).toString("hex")
    const sig = sign(null, digest, privateKey).toString("base64url")
    expect(answers("", raw, hex, sig)[0].signature).toBe(true)
    // The last character's 4 unused bits set: Buffer would read the same bytes, the canonical decoder refuses it.
    const loose = sig.slice(0, 85) + String.fromCharCode(sig.charCodeAt(85) + 1)
    expect(Buffer.from(loose, "base64url").equals(Buffer.from(sig, "base64url"))).toBe(true)
    expect(answers("", raw, hex, loose).map((a) => a.signature)).toEqual([false, false])
    expect(answers("x", raw.subarray(1), hex, sig).map((a) => a.signature)).toEqual([false, false])
  })
})
