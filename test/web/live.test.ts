import * as fc from "fast-check"
import { makeParser } from "effect/encoding/Sse"
import { describe, expect, it } from "vitest"
import type { TrustEvent } from "../../src/domain/TrustEvent.js"
import { HeartbeatComment, sseMessageOf, StreamEventName } from "../../src/events/LiveStream.js"
import { buildChain, otherSigner, testJwks, testSigner } from "../events/chains.js"
import { overTheWire } from "../log/logs.js"
import { importBundledVerifier } from "./bundled.js"

/**
 * The page's live-stream module (src/web/live.ts, as bundled into /web/verify.js): its SSE parser on
 * what the service's own stream writer sends, cut into arbitrary chunks, and on the format's other line
 * endings; and the check of one arriving event against the one before it, with the keys fetched again
 * once for an unknown kid.
 */

interface SseMessage {
  readonly id: string
  readonly event: string
  readonly data: string
}

interface Head {
  readonly sequence: number
  readonly eventHash: string | null
}

interface Keyring {
  readonly jwks: () => Promise<unknown>
  readonly refresh: (kid: string) => Promise<boolean>
}

interface Arrival {
  readonly report: { readonly ok: boolean; readonly reason?: string; readonly sequence?: number; readonly events: ReadonlyArray<{ hash_ok: boolean; link_ok: boolean; signature_ok: boolean }> }
  readonly next: Head
  readonly refetchedKeys: boolean
}

interface WebLive {
  readonly MaxSseLine: number
  readonly sseParser: () => (chunk: string) => Array<SseMessage>
  readonly keyring: (fetchJwks: () => Promise<unknown>) => Keyring
  readonly checkArrival: (data: string, previous: Head, publicId: string, keys: Keyring) => Promise<Arrival>
}

const web = await importBundledVerifier<WebLive>()

const publicId = "DET-V1-WEB-LIVE-0001"
const chain = overTheWire(buildChain(publicId, [0, 1, 2, 3, 4].map((n) => ({ type: "determination.updated" as const, payload: { n } })))) as Array<TrustEvent>
const genesis: Head = { sequence: 0, eventHash: null }

/** Cuts `text` at the given offsets (any, sorted and deduplicated here). */
const cut = (text: string, offsets: ReadonlyArray<number>) => {
  const points = [...new Set(offsets.map((o) => o % (text.length + 1)))].sort((a, b) => a - b)
  const parts: Array<string> = []
  let from = 0
  for (const point of points) {
    parts.push(text.slice(from, point))
    from = point
  }
  parts.push(text.slice(from))
  return parts
}

const parseAll = (chunks: ReadonlyArray<string>) => {
  const parse = web.sseParser()
  return chunks.flatMap((chunk) => parse(chunk))
}

describe("the page's SSE parser", () => {
  it("reads the service's stream, heartbeats and all, however the bytes are cut", () => {
    fc.assert(fc.property(
      fc.array(fc.boolean(), { minLength: chain.length, maxLength: chain.length }),
      fc.array(fc.nat(), { maxLength: 30 }),
      (heartbeats, offsets) => {
        const text = `: ${publicId} after 0\n\n` + chain.map((event, i) => (heartbeats[i] ? HeartbeatComment : "") + sseMessageOf(event)).join("")
        const messages = parseAll(cut(text, offsets))
        expect(messages.map((m) => m.id)).toEqual(chain.map((e) => String(e.sequence)))
        expect(messages.every((m) => m.event === StreamEventName)).toBe(true)
        expect(messages.map((m) => JSON.parse(m.data))).toEqual(chain)
      }
    ))
  })

  it("accepts CRLF, LF and CR line ends, even a CRLF split across chunks", () => {
    const line = fc.stringMatching(/^[a-z0-9 {}":,]{0,12}$/)
    fc.assert(fc.property(
      fc.array(fc.record({ id: fc.stringMatching(/^[0-9]{1,4}$/), data: fc.array(line, { minLength: 1, maxLength: 3 }) }), { maxLength: 6 }),
      fc.constantFrom("\n", "\r\n", "\r"),
      fc.array(fc.nat(), { maxLength: 20 }),
      (sent, eol, offsets) => {
        const text = sent.map((m) => [`id: ${m.id}`, "event: pv.trust.event", ...m.data.map((d) => `data: ${d}`), ""].join(eol) + eol).join("")
        const messages = parseAll(cut(text, offsets))
        expect(messages).toEqual(sent.map((m) => ({ id: m.id, event: "pv.trust.event", data: m.data.join("\n") })))
      }
    ))
    expect(parseAll(["id: 1\r", "\ndata: a\r", "\n\r", "\n"])).toEqual([{ id: "1", event: "message", data: "a" }])
    expect(parseAll(["data: a\r", "", "\n\r", "\n", "data: b\n\n"])).toEqual([
      { id: "", event: "message", data: "a" },
      { id: "", event: "message", data: "b" }
    ])
  })

  it("keeps the last id, skips comments and blocks without data, and reads fields without a space or value", () => {
    const parse = web.sseParser()
    expect(parse(": keep-alive\n\nid: 7\nevent: x\n\ndata:one\ndata\n\n")).toEqual([{ id: "7", event: "message", data: "one\n" }])
    // An id with a NUL is ignored; a message is not dispatched before its blank line.
    expect(parse("id: 8\0\ndata: two\n")).toEqual([])
    expect(parse("\n")).toEqual([{ id: "7", event: "message", data: "two" }])
  })

  it("reads any stream as Effect's own SSE parser (effect/encoding/Sse makeParser) does, however it is cut", () => {
    // An implementation that is not ours: every field kind, comments, retry lines, ids with and without NUL,
    // blocks without data, every line ending, and arbitrary cuts.
    const field = fc.oneof(
      fc.stringMatching(/^[a-z0-9 {}":,]{0,8}$/).map((v) => `data: ${v}`),
      fc.stringMatching(/^[a-z0-9]{0,6}$/).map((v) => `data:${v}`),
      fc.constant("data"),
      fc.stringMatching(/^[a-z.]{0,8}$/).map((v) => `event: ${v}`),
      fc.stringMatching(/^[0-9]{0,4}$/).map((v) => `id: ${v}`),
      fc.constant("id: 9\0"),
      fc.stringMatching(/^[0-9]{1,4}$/).map((v) => `retry: ${v}`),
      fc.constant(": keep-alive"),
      fc.constant("")
    )
    fc.assert(fc.property(
      fc.array(field, { maxLength: 24 }),
      fc.constantFrom("\n", "\r\n", "\r"),
      fc.array(fc.nat(), { maxLength: 20 }),
      (lines, eol, offsets) => {
        const text = lines.map((line) => line + eol).join("") + eol
        const theirs: Array<SseMessage> = []
        const parser = makeParser((event) => {
          if (event._tag === "Event") theirs.push({ id: event.id ?? "", event: event.event, data: event.data })
        })
        for (const chunk of cut(text, offsets)) expect(parser.feed(chunk)).toBeUndefined()
        expect(parseAll(cut(text, offsets))).toEqual(theirs)
      }
    ))
  })

  it("refuses a line longer than MaxSseLine instead of buffering without end", () => {
    const parse = web.sseParser()
    expect(() => parse("data: " + "x".repeat(web.MaxSseLine))).toThrow(/longer than/)
  })
})

describe("an arriving event, checked against the one before it", () => {
  const onlyOnce = () => {
    let fetches = 0
    const keys = web.keyring(async () => {
      fetches += 1
      return fetches === 1 ? { keys: [] } : testJwks
    })
    return { keys, fetches: () => fetches }
  }

  it("verifies a chain event by event, each linked to the last", async () => {
    const keys = web.keyring(async () => testJwks)
    let previous = genesis
    for (const event of chain) {
      const arrival = await web.checkArrival(JSON.stringify(event), previous, publicId, keys)
      expect(arrival.report.ok).toBe(true)
      expect(arrival.report.events[0]).toMatchObject({ hash_ok: true, link_ok: true, signature_ok: true })
      previous = arrival.next
    }
    expect(previous).toEqual({ sequence: 5, eventHash: chain[4]!.eventHash })
  })

  it("names the failed check: a changed payload, a missing event, another determination's event, a foreign key", async () => {
    const keys = web.keyring(async () => testJwks)
    const after = (i: number): Head => ({ sequence: chain[i]!.sequence, eventHash: chain[i]!.eventHash })
    const changed = { ...chain[2]!, payload: { n: 99 } }
    const tampered = await web.checkArrival(JSON.stringify(changed), after(1), publicId, keys)
    expect(tampered.report).toMatchObject({ ok: false, reason: "hash-mismatch", sequence: 3 })
    expect(tampered.report.events[0]).toMatchObject({ hash_ok: false, link_ok: true, signature_ok: true })
    // The next event is judged on its own: it links to what the rejected one stated.
    expect(tampered.next).toEqual(after(2))
    expect((await web.checkArrival(JSON.stringify(chain[3]), tampered.next, publicId, keys)).report.ok).toBe(true)

    const gap = await web.checkArrival(JSON.stringify(chain[3]), after(1), publicId, keys)
    expect(gap.report).toMatchObject({ ok: false, reason: "sequence-mismatch" })
    const foreign = await web.checkArrival(JSON.stringify(chain[0]), genesis, "DET-V1-SOMEONE-ELSE", keys)
    expect(foreign.report).toMatchObject({ ok: false, reason: "wrong-determination" })
    const [otherKey] = overTheWire(buildChain(publicId, [{ type: "determination.updated", payload: { n: 0 }, signer: otherSigner }])) as Array<TrustEvent>
    expect((await web.checkArrival(JSON.stringify(otherKey), genesis, publicId, keys)).report).toMatchObject({ ok: false, reason: "unknown-kid" })
    const notJson = await web.checkArrival("{ not json", genesis, publicId, keys)
    expect(notJson.report).toMatchObject({ ok: false, reason: "malformed-event" })
    expect(notJson.next).toEqual(genesis)
  })

  it("fetches the keys again once for an unknown kid, and not again for the same kid", async () => {
    const fresh = onlyOnce()
    const arrival = await web.checkArrival(JSON.stringify(chain[0]), genesis, publicId, fresh.keys)
    expect(arrival.report.ok).toBe(true)
    expect(arrival.refetchedKeys).toBe(true)
    expect(fresh.fetches()).toBe(2)

    const [otherKey] = overTheWire(buildChain(publicId, [{ type: "determination.updated", payload: { n: 0 }, signer: otherSigner }])) as Array<TrustEvent>
    const first = await web.checkArrival(JSON.stringify(otherKey), genesis, publicId, fresh.keys)
    expect(first).toMatchObject({ refetchedKeys: true, report: { ok: false, reason: "unknown-kid" } })
    const second = await web.checkArrival(JSON.stringify(otherKey), genesis, publicId, fresh.keys)
    expect(second).toMatchObject({ refetchedKeys: false, report: { ok: false, reason: "unknown-kid" } })
    expect(fresh.fetches()).toBe(3)
    expect(testSigner.jwk.kid).not.toBe(otherSigner.jwk.kid)
  })

  it("asks for the keys again after a failed fetch instead of keeping the failure", async () => {
    let fetches = 0
    const keys = web.keyring(async () => {
      fetches += 1
      if (fetches === 1) throw new Error("offline")
      return testJwks
    })
    await expect(web.checkArrival(JSON.stringify(chain[0]), genesis, publicId, keys)).rejects.toThrow("offline")
    expect((await web.checkArrival(JSON.stringify(chain[0]), genesis, publicId, keys)).report.ok).toBe(true)
  })
})

describe("the service's stream writer (effect/encoding/Sse's encoder)", () => {
  it("writes each event as id, event and one data line, the format of docs/API.md's stream", () => {
    for (const event of chain) {
      expect(sseMessageOf(event)).toBe(`id: ${event.sequence}\nevent: ${StreamEventName}\ndata: ${JSON.stringify(event)}\n\n`)
    }
  })
})
