import { createHash, generateKeyPairSync } from "node:crypto"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import {
  noteKeyId,
  noteSignerFromPrivateKey,
  openNote,
  parseVerifierKey,
  signNote,
  splitNote,
  verifierKeyOf,
  verifierKeyOfSigner
} from "../../src/log/Note.js"

// golang.org/x/mod/sumdb/note's test vectors (note_test.go).
const peterKey = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
const peterPrivate = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
const enochKey = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
const text = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
const peterSig = "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
const enochSig = "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"

/** Go's private key string is PRIVATE+KEY+<name>+<key ID>+base64(0x01 ‖ 32-byte seed); base64 may hold `+`. */
const peterSeed = Buffer.from(peterPrivate.slice("PRIVATE+KEY+PeterNeumann+c74f20a3+".length), "base64").subarray(1)
const peterSigner = noteSignerFromPrivateKey("PeterNeumann", privateKeyFromSeed(peterSeed))

describe("verifier keys", () => {
  it("Go's PeterNeumann key parses, and its key ID is SHA-256(name ‖ 0x0A ‖ 0x01 ‖ key)[:4]", () => {
    const parsed = parseVerifierKey(peterKey)
    expect(parsed.ok).toBe(true)
    if (!parsed.ok) return
    const raw = Buffer.from(peterKey.split("+")[2]!, "base64").subarray(1)
    const expected = createHash("sha256").update(Buffer.concat([Buffer.from("PeterNeumann\n"), Buffer.of(1), raw])).digest().subarray(0, 4)
    expect(Buffer.from(parsed.value.keyId).toString("hex")).toBe("c74f20a3")
    expect(Buffer.from(expected).toString("hex")).toBe("c74f20a3")
    expect(Buffer.from(noteKeyId("PeterNeumann", raw)).toString("hex")).toBe("c74f20a3")
    expect(verifierKeyOf("PeterNeumann", raw)).toBe(peterKey)
  })

  it("the key derived from Go's private key is Go's verifier key", () => {
    expect(Buffer.from(peterSigner.keyId).toString("hex")).toBe("c74f20a3")
    expect(peterSeed.length).toBe(32)
    expect(verifierKeyOfSigner("PeterNeumann", privateKeyFromSeed(peterSeed))).toBe(peterKey)
  })

  it("a key whose base64 holds `+` still parses (only the first two `+` separate fields)", () => {
    const key = Array.from({ length: 64 }, (_, i) => privateKeyFromSeed(Buffer.alloc(32, i)))
      .map((privateKey) => verifierKeyOfSigner("example.com/log", privateKey))
      .find((vkey) => vkey.split("+").length > 3)!
    expect(key).toBeDefined()
    const parsed = parseVerifierKey(key)
    expect(parsed.ok && verifierKeyOf(parsed.value.name, parsed.value.publicKey)).toBe(key)
  })

  it("refuses every substring and every one-character change of the key (as Go's test does)", () => {
    const bytes = [...peterKey]
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i + 1; j <= bytes.length; j++) {
        if (i !== 0 || j !== bytes.length) expect([peterKey.slice(i, j), parseVerifierKey(peterKey.slice(i, j)).ok]).toEqual([peterKey.slice(i, j), false])
      }
    }
    for (let i = 0; i < bytes.length; i++) {
      const changed = bytes.map((c, k) => (k === i ? String.fromCharCode(c.charCodeAt(0) + 1) : c)).join("")
      expect([changed, parseVerifierKey(changed).ok]).toEqual([changed, false])
    }
    // Wrong key length and unknown algorithm, each with a key ID adjusted to match (Go's vectors).
    expect(parseVerifierKey("PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==").ok).toBe(false)
    expect(parseVerifierKey("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW").ok).toBe(false)
    expect(parseVerifierKey("PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW").ok).toBe(false)
    expect(parseVerifierKey("Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW").ok).toBe(false)
    expect(parseVerifierKey(42).ok).toBe(false)
  })
})

describe("signed notes (C2SP signed-note, Go's vectors)", () => {
  it("signing Go's text with Go's key gives Go's note byte for byte", () => {
    expect(signNote(text, peterSigner)).toBe(text + "\n" + peterSig)
  })

  it("opens the note with Peter's key, and also when an unknown key signed too", () => {
    expect(openNote(text + "\n" + peterSig, peterKey)).toEqual({ ok: true, value: text })
    expect(openNote(text + "\n" + peterSig + enochSig, peterKey)).toEqual({ ok: true, value: text })
    expect(openNote(text + "\n" + enochSig + peterSig, peterKey)).toEqual({ ok: true, value: text })
    expect(openNote(text + "\n" + enochSig, enochKey)).toEqual({ ok: true, value: text })
    expect(openNote(Buffer.from(text + "\n" + peterSig), peterKey)).toEqual({ ok: true, value: text })
  })

  it("a changed text, another key, or no signature by the known key fails", () => {
    expect(openNote(text.replace("cryptography", "cryptographY") + "\n" + peterSig, peterKey).ok).toBe(false)
    expect(openNote(text + "\n" + peterSig, enochKey).ok).toBe(false)
    expect(openNote(text + "\n" + enochSig, peterKey)).toEqual({ ok: false, detail: "the note has no signature by PeterNeumann+c74f20a3" })
    const other = parseVerifierKey(verifierKeyOfSigner("PeterNeumann", generateKeyPairSync("ed25519").privateKey))
    expect(other.ok && openNote(text + "\n" + peterSig, other.value).ok).toBe(false)
  })

  it("a corrupted signature by the known key rejects the whole note, even next to a good one", () => {
    const corrupted = peterSig.slice(0, 60) + "ABCD" + peterSig.slice(60)
    expect(openNote(text + "\n" + corrupted, peterKey).ok).toBe(false)
    expect(openNote(text + "\n" + peterSig + corrupted, peterKey).ok).toBe(false)
  })

  it("ignores signatures that share only the name or only the key ID with the known key", () => {
    const sameNameOtherId = "— PeterNeumann " + Buffer.concat([Buffer.from("00000000", "hex"), Buffer.alloc(64, 1)]).toString("base64") + "\n"
    const sameIdOtherName = peterSig.replace("PeterNeumann", "PeterNeuman")
    expect(openNote(text + "\n" + sameNameOtherId + sameIdOtherName + peterSig, peterKey)).toEqual({ ok: true, value: text })
    expect(openNote(text + "\n" + sameNameOtherId + sameIdOtherName, peterKey).ok).toBe(false)
  })

  it("refuses malformed notes (Go's list, and more)", () => {
    const bad: Array<string | Uint8Array> = [
      text,
      text + "\n",
      text + "\n" + peterSig.slice(0, -1),
      "\x01" + text + "\n" + peterSig,
      Buffer.concat([Buffer.of(0xff), Buffer.from(text + "\n" + peterSig)]),
      text + "\n" + "— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=",
      text + "\n" + peterSig + "Unexpected line.\n",
      text + "\n" + peterSig.replace("— ", "-- "),
      text + "\n" + peterSig.replace("— ", "—"),
      text + "\n" + peterSig.replace("=\n", "\n"),
      text + "\n" + "— PeterNeumann AAAA\n",
      text.replace("\n", "\r\n") + "\n" + peterSig,
      text + "\n" + peterSig.repeat(101),
      "\uD800" + text + "\n" + peterSig
    ]
    for (const message of bad) expect(openNote(message, peterKey).ok).toBe(false)
    expect(openNote(42, peterKey).ok).toBe(false)
    expect(openNote(text + "\n" + peterSig, "not a key").ok).toBe(false)
  })

  it("the text is separated from the signatures by the last blank line", () => {
    const withBlank = "first\n\nsecond\n"
    const note = signNote(withBlank, peterSigner)
    const split = splitNote(note)
    expect(split.ok && split.value.text).toBe(withBlank)
    expect(openNote(note, peterKey)).toEqual({ ok: true, value: withBlank })
  })

  it("signing refuses texts that are not note texts", () => {
    for (const t of ["", "no newline", "tab\there\n", "\uDC00\n"]) expect(() => signNote(t, peterSigner)).toThrow(TypeError)
    expect(() => signNote(text, [])).toThrow(TypeError)
    expect(() => noteSignerFromPrivateKey("bad+name", generateKeyPairSync("ed25519").privateKey)).toThrow(TypeError)
  })

  it("any text signed by any key opens with that key and with no other (property)", () => {
    const noteText = fc.array(fc.string({ unit: "grapheme", minLength: 0, maxLength: 20 }).map((line) => line.replace(/[\u0000-\u001f]/g, "")), { minLength: 1, maxLength: 5 })
      .map((lines) => lines.join("\n") + "\n")
    const name = fc.stringMatching(/^[a-z0-9./_-]{1,20}$/)
    fc.assert(
      fc.property(noteText, name, fc.uint8Array({ minLength: 32, maxLength: 32 }), (body, keyName, seed) => {
        const key = privateKeyFromSeed(seed)
        const signer = noteSignerFromPrivateKey(keyName, key)
        const note = signNote(body, signer)
        expect(openNote(note, verifierKeyOfSigner(keyName, key))).toEqual({ ok: true, value: body })
        expect(openNote(note, verifierKeyOfSigner(keyName + "x", key)).ok).toBe(false)
        expect(openNote(note, peterKey).ok).toBe(false)
      }),
      { numRuns: 100 }
    )
  })
})
