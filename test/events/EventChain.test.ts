import { it } from "@effect/vitest"
import * as fc from "fast-check"
import { describe, expect } from "vitest"
import { createHash, createPublicKey } from "node:crypto"
import canonicalize from "canonicalize"
import { EventTypes, type TrustEvent } from "../../src/domain/TrustEvent.js"
import { eventHashOf, kidOf } from "../../src/domain/EventChain.js"
import { privateKeyFromSeed, testSigningSeed } from "../../src/events/Signer.js"
import { verifyEventChain } from "../../src/domain/EventVerify.js"
import { buildChain, headOf, otherSigner, testJwks, testSigner, type ChainItem } from "./chains.js"

const publicId = "DET-V1-CHAIN-0001"

const jsonLeaf = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
  fc.boolean(),
  fc.constant(null)
)
const key = fc.stringMatching(/^[a-z_]{1,10}$/)
const payload = fc.dictionary(key, fc.oneof(jsonLeaf, fc.array(jsonLeaf, { maxLength: 4 }), fc.dictionary(key, jsonLeaf, { maxKeys: 3 })), {
  maxKeys: 6
})
const item: fc.Arbitrary<ChainItem> = fc.record({ type: fc.constantFrom(...EventTypes), payload })
const items = fc.array(item, { minLength: 1, maxLength: 25 })

/** A chain and a position in it. */
const chainAndIndex = items.chain((list) => fc.tuple(fc.constant(list), fc.nat({ max: list.length - 1 })))

const verify = (events: ReadonlyArray<unknown>, head = headOf(events as ReadonlyArray<TrustEvent>)) =>
  verifyEventChain(events, testJwks, { publicId, head })

const flipBit = (base64url: string, byte: number, bit: number) => {
  const bytes = Buffer.from(base64url, "base64url")
  bytes[byte % bytes.length]! ^= 1 << bit
  return bytes.toString("base64url")
}

describe("event hash recipe", () => {
  it("is SHA-256 of 'pv-event-v1\\n' + JCS of the event without eventHash and signature", () => {
    const [event] = buildChain(publicId, [{ type: "determination.recorded", payload: { b: 1, a: "x" } }])
    const { eventHash: _h, signature: _s, ...covered } = event!
    const expected = createHash("sha256").update("pv-event-v1\n" + canonicalize(covered)!, "utf8").digest("hex")
    expect(event!.eventHash).toBe(expected)
    expect(eventHashOf(event!)).toBe(expected)
    expect(event!.previousEventHash).toBeNull()
  })

  it("kid is the first 16 hex of SHA-256 of the raw 32-byte public key", () => {
    const spki = createPublicKey(privateKeyFromSeed(testSigningSeed)).export({ format: "der", type: "spki" })
    const raw = spki.subarray(spki.length - 32)
    expect(testSigner.kid).toBe(createHash("sha256").update(raw).digest("hex").slice(0, 16))
    expect(kidOf(raw)).toBe(testSigner.kid)
    expect(testSigner.jwk).toEqual({ kty: "OKP", crv: "Ed25519", x: raw.toString("base64url"), kid: testSigner.kid, use: "sig", alg: "Ed25519" })
  })
})

describe("chain verification (properties)", () => {
  it("any generated chain verifies", () => fc.assert(fc.property(items, (list) => {
    const events = buildChain(publicId, list)
    const verdict = verify(events)
    expect(verdict).toEqual({ ok: true, count: list.length, head: headOf(events), kids: [testSigner.kid] })
  })))

  it("a changed payload is a hash mismatch at that sequence", () => fc.assert(fc.property(chainAndIndex, ([list, i]) => {
    const events: Array<any> = buildChain(publicId, list)
    events[i] = { ...events[i], payload: { ...events[i].payload, __mutation__: true } }
    expect(verify(events)).toMatchObject({ ok: false, sequence: i + 1, reason: "hash-mismatch" })
  })))

  it("a changed eventHash is caught at that sequence", () => fc.assert(fc.property(chainAndIndex, fc.nat({ max: 63 }), ([list, i], at) => {
    const events: Array<any> = buildChain(publicId, list)
    const hash: string = events[i].eventHash
    const replaced = hash.slice(0, at) + (hash[at] === "0" ? "1" : "0") + hash.slice(at + 1)
    events[i] = { ...events[i], eventHash: replaced }
    // The content no longer hashes to it; the head the server reports still names the original.
    expect(verify(events, headOf(buildChain(publicId, list)))).toMatchObject({ ok: false, sequence: i + 1, reason: "hash-mismatch" })
  })))

  it("a changed previousEventHash is a broken link at that sequence", () => fc.assert(fc.property(chainAndIndex, ([list, i]) => {
    const events: Array<any> = buildChain(publicId, list)
    events[i] = { ...events[i], previousEventHash: "f".repeat(64) }
    expect(verify(events)).toMatchObject({ ok: false, sequence: i + 1, reason: "broken-link" })
  })))

  it("a removed event is caught at its sequence", () => fc.assert(fc.property(chainAndIndex, ([list, i]) => {
    const full = buildChain(publicId, list)
    const events = full.filter((_, j) => j !== i)
    const verdict = verify(events, headOf(full))
    expect(verdict).toMatchObject({ ok: false, sequence: i + 1, reason: i === full.length - 1 ? "head-mismatch" : "sequence-mismatch" })
  })))

  it("reordered events are caught at the first displaced sequence", () => fc.assert(fc.property(
    items.filter((l) => l.length >= 2).chain((l) =>
      fc.tuple(fc.constant(l), fc.nat({ max: l.length - 1 }), fc.nat({ max: l.length - 1 })).filter(([, a, b]) => a !== b)),
    ([list, a, b]) => {
      const events = buildChain(publicId, list)
      ;[events[a], events[b]] = [events[b]!, events[a]!]
      expect(verify(events)).toMatchObject({ ok: false, sequence: Math.min(a, b) + 1, reason: "sequence-mismatch" })
    })))

  it("a flipped signature bit is a bad signature at that sequence", () => fc.assert(fc.property(chainAndIndex, fc.nat({ max: 63 }), fc.nat({ max: 7 }),
    ([list, i], byte, bit) => {
      const events: Array<any> = buildChain(publicId, list)
      events[i] = { ...events[i], signature: { ...events[i].signature, sig: flipBit(events[i].signature.sig, byte, bit) } }
      expect(verify(events)).toMatchObject({ ok: false, sequence: i + 1, reason: "bad-signature" })
    })))

  it("a signature by a key outside the JWKS is an unknown kid; one forged under a known kid is a bad signature", () => fc.assert(fc.property(
    chainAndIndex, ([list, i]) => {
      const foreign = list.map((entry, j) => (j === i ? { ...entry, signer: otherSigner } : entry))
      expect(verify(buildChain(publicId, foreign))).toMatchObject({ ok: false, sequence: i + 1, reason: "unknown-kid" })
      const forger = { ...otherSigner, kid: testSigner.kid }
      const forged = list.map((entry, j) => (j === i ? { ...entry, signer: forger } : entry))
      expect(verify(buildChain(publicId, forged))).toMatchObject({ ok: false, sequence: i + 1, reason: "bad-signature" })
    })))

  it("an event of another determination is refused", () => fc.assert(fc.property(chainAndIndex, ([list, i]) => {
    const events: Array<any> = buildChain(publicId, list)
    const other = buildChain("DET-V1-OTHER", list)
    events[i] = other[i]
    expect(verify(events)).toMatchObject({ ok: false, sequence: i + 1 })
  })))
})

describe("chain verification (edges)", () => {
  const events = buildChain(publicId, [
    { type: "determination.recorded", payload: { version: 1 } },
    { type: "determination.updated", payload: { version: 2 } },
    { type: "freshness.changed", payload: { freshness_state: "STALE" } }
  ])

  it("an empty chain verifies against an empty head and fails against a non-empty one", () => {
    expect(verifyEventChain([], testJwks, { head: { sequence: 0, eventHash: null } })).toMatchObject({ ok: true, count: 0 })
    expect(verifyEventChain([], testJwks, { head: headOf(events) })).toMatchObject({ ok: false, sequence: 1, reason: "head-mismatch" })
  })

  it("a page after an anchor verifies from that anchor", () => {
    expect(verifyEventChain(events.slice(1), testJwks, { anchor: headOf(events.slice(0, 1)), head: headOf(events) }))
      .toMatchObject({ ok: true, count: 2 })
    expect(verifyEventChain(events.slice(1), testJwks)).toMatchObject({ ok: false, sequence: 1, reason: "sequence-mismatch" })
  })

  it("a JWKS entry whose kid is not its key's kid vouches for nothing", () => {
    const lying = { keys: [{ ...otherSigner.jwk, kid: testSigner.kid }] }
    expect(verifyEventChain(events, lying)).toMatchObject({ ok: false, sequence: 1, reason: "unknown-kid" })
  })

  it("a malformed event is reported, not thrown", () => {
    expect(verifyEventChain([events[0], { sequence: "2" }], testJwks)).toMatchObject({ ok: false, sequence: 2, reason: "malformed-event" })
    expect(verifyEventChain([null], testJwks)).toMatchObject({ ok: false, sequence: 1, reason: "malformed-event" })
    expect(verifyEventChain(events, null)).toMatchObject({ ok: false, sequence: 1, reason: "unknown-kid" })
  })

  it("a non-canonical signature encoding is refused", () => {
    const sig = events[0]!.signature.sig
    // The 86th base64url character carries 2 bits; another character with the same 2 bits decodes identically.
    const last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".indexOf(sig[85]!)
    const twin = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last ^ 1]!
    const tampered = [{ ...events[0]!, signature: { ...events[0]!.signature, sig: sig.slice(0, 85) + twin } }]
    expect(Buffer.from(tampered[0]!.signature.sig, "base64url")).toEqual(Buffer.from(sig, "base64url"))
    expect(verifyEventChain(tampered, testJwks)).toMatchObject({ ok: false, sequence: 1, reason: "bad-signature" })
  })
})
