import { createHash, createPublicKey, generateKeyPairSync, sign, type KeyObject } from "node:crypto"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { formatCheckpoint, openCheckpoint, signCheckpoint, type Checkpoint } from "../../src/log/Checkpoint.js"
import {
  appendSignatureLines,
  checkCosignatures,
  cosignatureKeyId,
  cosignatureLinesOf,
  cosignerFromPrivateKey,
  cosignerVerifierKeyOf,
  MaxFutureSkewSeconds,
  parseCosignatureBytes,
  parseCosignerKey,
  requireQuorum,
  type CosignatureVerifier
} from "../../src/log/Cosignature.js"
import { noteSignerFromPrivateKey, splitNote, verifierKeyOfSigner } from "../../src/log/Note.js"

const rawOf = (key: KeyObject) => Buffer.from(createPublicKey(key).export({ format: "jwk" }).x as string, "base64url")

const witnessKey = privateKeyFromSeed(Buffer.alloc(32, 4))
const witness = cosignerFromPrivateKey("witness.example/w1", witnessKey)
const otherWitness = cosignerFromPrivateKey("witness.example/w2", privateKeyFromSeed(Buffer.alloc(32, 5)))
const logKey = privateKeyFromSeed(Buffer.alloc(32, 9))
const logSigner = noteSignerFromPrivateKey("example.com/log", logKey)
const checkpoint: Checkpoint = {
  origin: "example.com/log",
  size: 20852163,
  root: Buffer.from("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=", "base64"),
  extensions: []
}
const text = formatCheckpoint(checkpoint)
const logNote = signCheckpoint(checkpoint, logSigner)
const now = 1_800_000_000

const verifierOf = (vkey: string): CosignatureVerifier => {
  const parsed = parseCosignerKey(vkey)
  if (!parsed.ok) throw new Error(parsed.detail)
  return parsed.value
}

describe("cosignature/v1 formats, derived by hand from the spec's recipe", () => {
  it("key ID = SHA-256(name ‖ 0x0A ‖ 0x04 ‖ key)[:4] and the vkey is name+id+base64(0x04 ‖ key)", () => {
    const key = rawOf(witnessKey)
    const id = createHash("sha256").update(Buffer.concat([Buffer.from("witness.example/w1\n"), Buffer.of(4), key])).digest().subarray(0, 4)
    expect(Buffer.from(cosignatureKeyId("witness.example/w1", key))).toEqual(id)
    const vkey = `witness.example/w1+${id.toString("hex")}+${Buffer.concat([Buffer.of(4), key]).toString("base64")}`
    expect(witness.verifierKey).toBe(vkey)
    expect(cosignerVerifierKeyOf("witness.example/w1", key)).toBe(vkey)
    expect(verifierOf(vkey).publicKey).toEqual(key)
  })

  it("the line is — name base64(key ID ‖ u64 BE time ‖ Ed25519 over `cosignature/v1\\ntime T\\n` + body)", () => {
    const t = 1679315147
    const message = Buffer.from(`cosignature/v1\ntime ${t}\n${text}`)
    const signature = sign(null, message, witnessKey)
    const stamp = Buffer.alloc(8)
    stamp.writeBigUInt64BE(BigInt(t))
    const id = createHash("sha256").update(Buffer.concat([Buffer.from("witness.example/w1\n"), Buffer.of(4), rawOf(witnessKey)])).digest().subarray(0, 4)
    const line = `— witness.example/w1 ${Buffer.concat([id, stamp, signature]).toString("base64")}\n`
    expect(witness.cosign(text, t)).toBe(line)
  })

  it("parses the timestamp of the spec's example line and a published Go vector", () => {
    // tlog-cosignature's example: `— witness.example.com/w1 jWbPPw…`, signed at the example message's `time 1679315147`.
    const spec = Buffer.from("jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==", "base64")
    expect(parseCosignatureBytes(spec.subarray(4))).toMatchObject({ ok: true, value: { timestamp: 1679315147 } })
    const go = Buffer.from("ZGhGuQAAAABm/qTPeyKXD+R2rzyQsxPiP8mXum7qq/iF0u4vanlqJyocWODBt97w9uL+8qT7S5gxEHWWOworDcFiEBYJXORmnFBOBA==", "base64")
    expect(parseCosignatureBytes(go.subarray(4))).toMatchObject({ ok: true, value: { timestamp: 1727964367 } })
    expect(parseCosignatureBytes(go.subarray(5)).ok).toBe(false)
  })

  it("accepts a published native cosignature/v1 vkey and refuses a log (0x01) key", () => {
    expect(parseCosignerKey("remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2").ok).toBe(true)
    expect(parseCosignerKey(verifierKeyOfSigner("example.com/log", logKey)).ok).toBe(false)
    expect(parseCosignerKey("remora.n621.de+da77ade8+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2").ok).toBe(false)
    expect(parseCosignerKey("remora.n621.de+da77ade7").ok).toBe(false)
    expect(parseCosignerKey(7).ok).toBe(false)
  })
})

describe("verifying cosignatures on a checkpoint", () => {
  const cosigned = appendSignatureLines(logNote, [witness.cosign(text, now - 5)])

  it("the log's own key still opens a cosigned checkpoint (it ignores the lines it does not know)", () => {
    expect(openCheckpoint(cosigned, verifierKeyOfSigner("example.com/log", logKey)).ok).toBe(true)
  })

  it("counts pinned witnesses with a valid line; ignores unpinned ones and the log's line", () => {
    const both = appendSignatureLines(cosigned, [otherWitness.cosign(text, now)])
    const check = checkCosignatures(both, [verifierOf(witness.verifierKey)], now)
    expect(check.ok && check.value.valid.map((w) => [w.name, w.timestamp])).toEqual([["witness.example/w1", now - 5]])
    expect(requireQuorum(both, [verifierOf(witness.verifierKey), verifierOf(otherWitness.verifierKey)], 2, now).ok).toBe(true)
    const short = requireQuorum(cosigned, [verifierOf(witness.verifierKey), verifierOf(otherWitness.verifierKey)], 2, now)
    expect(short).toEqual({ ok: false, detail: "1 of the 2 pinned witnesses cosigned the checkpoint (witness.example/w1); the quorum is 2" })
  })

  it("refuses a time more than 60 s ahead, accepts one at the limit", () => {
    const ahead = appendSignatureLines(logNote, [witness.cosign(text, now + MaxFutureSkewSeconds + 1)])
    expect(requireQuorum(ahead, [verifierOf(witness.verifierKey)], 1, now).ok).toBe(false)
    const edge = appendSignatureLines(logNote, [witness.cosign(text, now + MaxFutureSkewSeconds)])
    expect(requireQuorum(edge, [verifierOf(witness.verifierKey)], 1, now).ok).toBe(true)
  })

  it("a line with the pinned name and ID that does not verify fails the check, even beside a good one", () => {
    const line = witness.cosign(text, now)
    const bytes = Buffer.from(line.slice("— witness.example/w1 ".length, -1), "base64")
    bytes[20] = bytes[20]! ^ 1
    const bad = `— witness.example/w1 ${bytes.toString("base64")}\n`
    expect(requireQuorum(appendSignatureLines(logNote, [bad]), [verifierOf(witness.verifierKey)], 1, now).ok).toBe(false)
    expect(requireQuorum(appendSignatureLines(logNote, [line, bad]), [verifierOf(witness.verifierKey)], 1, now).ok).toBe(false)
    // A cosignature over another checkpoint body does not verify on this one.
    const moved = logNote.replace("20852163", "20852164")
    expect(requireQuorum(appendSignatureLines(moved, [line]), [verifierOf(witness.verifierKey)], 1, now).ok).toBe(false)
  })

  it("property: any body and time round-trips; any one-bit change of the body or signature bytes fails", () => {
    const verifier = verifierOf(witness.verifierKey)
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-z0-9./-]{1,20}$/),
        fc.nat({ max: 2 ** 40 }),
        fc.integer({ min: 1, max: now }),
        fc.nat(71 * 8 - 1),
        (origin, size, t, bit) => {
          const body = `${origin}\n${size}\n${Buffer.alloc(32, size % 256).toString("base64")}\n`
          const line = witness.cosign(body, t)
          const split = splitNote(`${body}\n${line}`)
          if (!split.ok) return false
          const signature = split.value.signatures[0]!
          const parsed = parseCosignatureBytes(signature.signature)
          if (!parsed.ok || parsed.value.timestamp !== t || !verifier.verify(body, t, parsed.value.signature)) return false
          const flipped = Buffer.from(signature.signature)
          flipped[Math.floor(bit / 8)]! ^= 1 << (bit % 8)
          const reparsed = parseCosignatureBytes(flipped)
          const stillValid = reparsed.ok && verifier.verify(body, reparsed.value.timestamp, reparsed.value.signature)
          return !stillValid && !verifier.verify(body.replace("\n", "x\n"), t, parsed.value.signature)
        }
      ),
      { numRuns: 200 }
    )
  })

  it("a witness's answer is kept only when it holds that witness's valid line", () => {
    const verifier = verifierOf(witness.verifierKey)
    const answer = witness.cosign(text, now)
    expect(cosignatureLinesOf(answer, verifier, text)).toEqual({ ok: true, value: { lines: [answer.slice(0, -1)], timestamp: now } })
    expect(cosignatureLinesOf(otherWitness.cosign(text, now), verifier, text).ok).toBe(false)
    expect(cosignatureLinesOf(answer, verifier, text.replace("20852163", "1")).ok).toBe(false)
    expect(cosignatureLinesOf("not a line\n", verifier, text).ok).toBe(false)
    expect(cosignatureLinesOf(answer.slice(0, -1), verifier, text).ok).toBe(false)
  })

  it("appending the same line twice keeps one copy", () => {
    const line = witness.cosign(text, now)
    expect(appendSignatureLines(appendSignatureLines(logNote, [line]), [line])).toBe(logNote + line)
  })
})

describe("keys generated at random", () => {
  it("every generated witness key round-trips through its vkey", () => {
    for (let i = 0; i < 20; i++) {
      const key = generateKeyPairSync("ed25519").privateKey
      const cosigner = cosignerFromPrivateKey(`w${i}.example`, key)
      const parsed = parseCosignerKey(cosigner.verifierKey)
      expect(parsed.ok && Buffer.from(parsed.value.publicKey).equals(rawOf(key))).toBe(true)
    }
  })
})
