import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import { freshnessAt } from "../../src/domain/Freshness.js"
import * as JsonRpc from "../../src/mcp/JsonRpc.js"
import { ResultText, trustCacheHint } from "../../src/mcp/Mcp.js"

/** The 2026-07-28 cache hint of a trust-document result: never longer than the document's freshness state holds. */

const hintOf = (asOf: number, validUntil: number, now: number) => {
  const text = trustCacheHint({ freshness: { as_of: new Date(asOf).toISOString(), valid_until: new Date(validUntil).toISOString() } }, now)
  return JSON.parse(`{${text.slice(1)}}`) as { ttlMs: number; cacheScope: string }
}

const instant = fc.integer({ min: Date.UTC(2020, 0, 1), max: Date.UTC(2035, 0, 1) })

describe("MCP 2026-07-28 cache hints", () => {
  it("keeps a trust document fresh only while its freshness state stays what the document says", () => fc.assert(fc.property(
    instant,
    fc.integer({ min: 1, max: 400 * 86_400_000 }),
    fc.integer({ min: -10 * 86_400_000, max: 900 * 86_400_000 }),
    (asOf, window, offset) => {
      const validUntil = asOf + window
      const now = asOf + offset
      const { ttlMs, cacheScope } = hintOf(asOf, validUntil, now)
      expect(cacheScope).toBe("private")
      expect(Number.isInteger(ttlMs) && ttlMs >= 0).toBe(true)
      const state = freshnessAt(now, asOf, validUntil, "ACTIVE")
      if (ttlMs > 0) {
        expect(freshnessAt(now + ttlMs - 1, asOf, validUntil, "ACTIVE")).toBe(state)
        expect(freshnessAt(now + ttlMs, asOf, validUntil, "ACTIVE")).not.toBe(state)
      } else {
        expect(state).toBe("EXPIRED")
      }
    }
  )))

  it("a result's kept reply text carry, at every instant in any order, the hint computed afresh for that instant", () => fc.assert(fc.property(
    instant,
    fc.integer({ min: -400 * 86_400_000, max: 400 * 86_400_000 }),
    fc.array(fc.integer({ min: -10 * 86_400_000, max: 900 * 86_400_000 }), { minLength: 1, maxLength: 12 }),
    fc.oneof(fc.string(), fc.integer()),
    (asOf, window, offsets, id) => {
      const value = { freshness: { as_of: new Date(asOf).toISOString(), valid_until: new Date(asOf + window).toISOString() } }
      const text = JSON.stringify(value)
      const callResultJson = `{"content":[{"type":"text","text":${JSON.stringify(text)}}],"structuredContent":${text}}`
      const texts = new ResultText({ value, text, callResultJson })
      for (const offset of offsets) {
        const now = asOf + offset
        const reply = JSON.parse(JsonRpc.successText(id, texts.modern(now)))
        const hint = JSON.parse(`{${trustCacheHint(value, now).slice(1)}}`)
        expect(reply).toEqual({ jsonrpc: "2.0", id, result: { resultType: "complete", ...JSON.parse(callResultJson), ...hint, _meta: reply.result._meta } })
        expect(JSON.parse(JsonRpc.successText(id, texts.legacy))).toEqual({ jsonrpc: "2.0", id, result: JSON.parse(callResultJson) })
      }
    }
  )))

  it("a result's kept reply is, for any sequence of ids and instants, the envelope written afresh around the era's text", () => fc.assert(fc.property(
    instant,
    fc.integer({ min: -400 * 86_400_000, max: 400 * 86_400_000 }),
    fc.boolean(),
    fc.array(fc.tuple(
      fc.oneof(fc.constantFrom<JsonRpc.RequestId>(1, "1", 0, -0, "a"), fc.string(), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true })),
      fc.integer({ min: -10 * 86_400_000, max: 900 * 86_400_000 }),
      fc.boolean()
    ), { minLength: 1, maxLength: 16 }),
    (asOf, window, withFreshness, calls) => {
      const value = withFreshness ? { freshness: { as_of: new Date(asOf).toISOString(), valid_until: new Date(asOf + window).toISOString() } } : { changed: false }
      const text = JSON.stringify(value)
      const callResultJson = `{"content":[{"type":"text","text":${JSON.stringify(text)}}],"structuredContent":${text}}`
      const kept = new ResultText({ value, text, callResultJson })
      const fresh = new ResultText({ value, text, callResultJson })
      let previous: { readonly id: JsonRpc.RequestId; readonly modern: boolean; readonly body: string; readonly reply: JsonRpc.Reply } | undefined
      for (const [id, offset, modern] of calls) {
        const now = asOf + offset
        const reply = kept.reply(id, modern, now)
        const body = JsonRpc.successText(id, modern ? fresh.modern(now) : fresh.legacy)
        expect(reply).toEqual({ _tag: "Answer", status: 200, body })
        // Kept only for the same era, id and text: then it is the same reply object.
        if (previous !== undefined && previous.modern === modern && previous.id === id && previous.body === body) {
          expect(reply).toBe(previous.reply)
        }
        previous = { id, modern, body, reply }
      }
    }
  )))

  it("adds nothing to a result without a trust document's freshness", () => {
    for (const value of [null, 1, "x", [], {}, { freshness: {} }, { freshness: { as_of: 1, valid_until: 2 } }, { changed: false }]) {
      expect(trustCacheHint(value, Date.now())).toBe("")
    }
  })
})
