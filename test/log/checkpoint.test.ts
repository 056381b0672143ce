import { createHash } from "node:crypto"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { formatCheckpoint, openCheckpoint, parseCheckpoint, peekCheckpoint, signCheckpoint, type Checkpoint } from "../../src/log/Checkpoint.js"
import { noteSignerFromPrivateKey, signNote, verifierKeyOfSigner } from "../../src/log/Note.js"

const origin = "example.com/pv-log"
const key = privateKeyFromSeed(Buffer.alloc(32, 3))
const signer = noteSignerFromPrivateKey(origin, key)
const verifierKey = verifierKeyOfSigner(origin, key)
const root = createHash("sha256").update("root").digest()

describe("checkpoint text (C2SP tlog-checkpoint)", () => {
  it("formats Go's sumdb golden tree (size 123456789012, root = leaf hash of 'hello world')", () => {
    const hello = createHash("sha256").update(Buffer.concat([Buffer.of(0), Buffer.from("hello world")])).digest()
    const golden = "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n"
    expect(formatCheckpoint({ origin: "go.sum database tree", size: 123_456_789_012, root: hello, extensions: [] })).toBe(golden)
    const parsed = parseCheckpoint(golden)
    expect(parsed.ok && { ...parsed.value, root: Buffer.from(parsed.value.root).toString("hex") })
      .toEqual({ origin: "go.sum database tree", size: 123_456_789_012, root: hello.toString("hex"), extensions: [] })
  })

  it("reads the spec's example checkpoint", () => {
    const note = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n" +
      "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    const peeked = peekCheckpoint(note)
    expect(peeked.ok && [peeked.value.origin, peeked.value.size, Buffer.from(peeked.value.root).toString("base64")])
      .toEqual(["example.com/behind-the-sofa", 20_852_163, "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="])
    // Signed by a key we do not hold: it never opens with ours.
    expect(openCheckpoint(note, verifierKey).ok).toBe(false)
  })

  it("keeps extension lines and refuses malformed bodies", () => {
    const base64 = root.toString("base64")
    const withExtension = parseCheckpoint(`${origin}\n7\n${base64}\nextension one\n`)
    expect(withExtension.ok && withExtension.value.extensions).toEqual(["extension one"])
    const bad = [
      `${origin}\n7\n${base64}`,
      `${origin}\n7\n`,
      `\n7\n${base64}\n`,
      `${origin}\n07\n${base64}\n`,
      `${origin}\n-7\n${base64}\n`,
      `${origin}\n+7\n${base64}\n`,
      `${origin}\n7.0\n${base64}\n`,
      `${origin}\n0x7\n${base64}\n`,
      `${origin}\n9007199254740992\n${base64}\n`,
      `${origin}\n7\n${base64.slice(0, -1)}\n`,
      `${origin}\n7\n${base64.replace("=", "")}\n`,
      `${origin}\n7\n${Buffer.alloc(31).toString("base64")}\n`,
      `${origin}\n7\n${root.toString("hex")}\n`,
      `${origin}\n7\n${base64}\n\n`,
      `${origin}\n7\n${base64}\next\n\n`
    ]
    for (const text of bad) expect([text, parseCheckpoint(text).ok]).toEqual([text, false])
    expect(parseCheckpoint(`${origin}\n0\n${base64}\n`).ok).toBe(true)
  })

  it("format refuses what could not be read back", () => {
    const good: Checkpoint = { origin, size: 1, root, extensions: [] }
    expect(() => formatCheckpoint({ ...good, origin: "" })).toThrow()
    expect(() => formatCheckpoint({ ...good, origin: "a\nb" })).toThrow()
    expect(() => formatCheckpoint({ ...good, size: -1 })).toThrow()
    expect(() => formatCheckpoint({ ...good, size: 1.5 })).toThrow()
    expect(() => formatCheckpoint({ ...good, root: root.subarray(1) })).toThrow()
    expect(() => formatCheckpoint({ ...good, extensions: [""] })).toThrow()
  })
})

describe("signed checkpoints", () => {
  const checkpoint = fc.record({
    size: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
    root: fc.uint8Array({ minLength: 32, maxLength: 32 }),
    extensions: fc.array(fc.stringMatching(/^[ -~]{1,20}$/), { maxLength: 2 })
  }).map((fields): Checkpoint => ({ origin, ...fields }))

  it("sign then open gives back the checkpoint; the body is exactly the spec's lines (property)", () => {
    fc.assert(
      fc.property(checkpoint, (cp) => {
        const note = signCheckpoint(cp, signer)
        expect(note.startsWith(`${origin}\n${cp.size}\n${Buffer.from(cp.root).toString("base64")}\n`)).toBe(true)
        const opened = openCheckpoint(note, verifierKey)
        expect(opened.ok && { ...opened.value, root: Buffer.from(opened.value.root) }).toEqual({ ...cp, root: Buffer.from(cp.root) })
      }),
      { numRuns: 100 }
    )
  })

  it("a changed size, root or origin, another key, or a key named otherwise fails", () => {
    const note = signCheckpoint({ origin, size: 10, root, extensions: [] }, signer)
    expect(openCheckpoint(note, verifierKey).ok).toBe(true)
    expect(openCheckpoint(note.replace("\n10\n", "\n11\n"), verifierKey).ok).toBe(false)
    expect(openCheckpoint(note.replace(root.toString("base64"), Buffer.alloc(32).toString("base64")), verifierKey).ok).toBe(false)
    const otherKey = privateKeyFromSeed(Buffer.alloc(32, 4))
    expect(openCheckpoint(note, verifierKeyOfSigner(origin, otherKey)).ok).toBe(false)
    // A note signed by the right key under another name is not this log's checkpoint.
    const foreign = signNote(formatCheckpoint({ origin: "other.example/log", size: 10, root, extensions: [] }), signer)
    expect(openCheckpoint(foreign, verifierKey)).toEqual({ ok: false, detail: "the checkpoint's origin other.example/log is not the key's name example.com/pv-log" })
    expect(() => signCheckpoint({ origin: "other.example/log", size: 1, root, extensions: [] }, signer)).toThrow(TypeError)
    expect(openCheckpoint(signNote("not\na checkpoint\n", signer), verifierKey).ok).toBe(false)
  })
})
