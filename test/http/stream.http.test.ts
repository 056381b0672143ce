import { connect } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { pollUntil } from "../support/clockShift.js"
import { testDatabaseKind, withAdmin } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, expectProblem, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { eventsOf, openSse } from "../support/sse.js"
import { isolatedConfig } from "../support/testConfig.js"

let server: TestServer
let key: { api_key: string; key_id: string }
const asOf = Date.now() - DAY_MS
let changes = 0
const tiers = ["T1", "T2", "T3", "T4"] as const

const change = async (target: TestServer, publicId: string) => {
  changes += 1
  const reply = await putDetermination(target, publicId, determinationBody(asOf, { tier: tiers[changes % 4]!, eligible: changes % 2 === 0 }))
  expect([200, 201], reply.text).toContain(reply.status)
}

const stream = (query: string, headers: Record<string, string> = {}, bearer = key.api_key, target = server) =>
  openSse(`${target.baseUrl}/api/v1/events/stream?${query}`, { authorization: `Bearer ${bearer}`, ...headers })

/** pv_event_streams_open as `target`'s /metrics reports it. */
const streamsOpen = async (target = server) => {
  const text = (await request(target, "GET", "/metrics")).text
  return Number(/^pv_event_streams_open (\S+)$/m.exec(text)?.[1])
}

/**
 * Polls /metrics until no stream is open on `target`: a slot is freed when its client is gone, so within moments
 * (2 s for a busy machine; a slot held until an interrupted database read gave up took 5 s).
 */
const expectNoStreamOpen = async (target = server) => {
  expect(await pollUntil(() => streamsOpen(target), (open) => open === 0, { timeoutMs: 2_000 })).toBe(0)
}

/**
 * A client on a raw socket that sends GET /events/stream and leaves: at once (before the first byte of the
 * answer can be written), or once `bytes` of the answer arrived (while its body is written).
 */
const leaveStream = (publicId: string, bearer: string, bytes: number) =>
  new Promise<void>((resolve, reject) => {
    const url = new URL(server.baseUrl)
    const socket = connect(Number(url.port), url.hostname)
    let received = 0
    socket.on("connect", () => {
      socket.write(
        `GET /api/v1/events/stream?public_id=${publicId} HTTP/1.1\r\nHost: ${url.host}\r\n` +
          `Authorization: Bearer ${bearer}\r\nAccept: text/event-stream\r\n\r\n`
      )
      if (bytes === 0) socket.destroy()
    })
    socket.on("data", (chunk: Buffer) => {
      received += chunk.length
      if (received >= bytes) socket.destroy()
    })
    socket.on("close", () => resolve())
    socket.on("error", reject)
  })

const storedEvents = async (publicId: string) =>
  (await request(server, "GET", `/api/v1/events?public_id=${publicId}&limit=100`, { bearer: key.api_key })).body.events

beforeAll(async () => {
  server = await startTestServer({
    config: isolatedConfig({ PV_STREAM_HEARTBEAT_MS: "300", PV_MAX_STREAMS_PER_KEY: "3", PV_MAX_IN_FLIGHT: "2" })
  })
  key = await createKey(server, ["trust:read"])
})
afterAll(() => server?.close())

describe(`live event stream (${testDatabaseKind()})`, () => {
  it("sends the stored events first, then each new one within a second, in the SSE format", async () => {
    const id = "DET-V1-STREAM-LIVE"
    for (let i = 0; i < 3; i++) await change(server, id)
    const sse = await stream(`public_id=${id}`)
    expect(sse.status, sse.text).toBe(200)
    expect(sse.headers.get("content-type")).toMatch(/^text\/event-stream/)
    expect(sse.headers.get("cache-control")).toBe("no-cache")
    await sse.until((m) => eventsOf(m).length === 3)
    const stored = await storedEvents(id)
    expect(eventsOf(sse.messages)).toEqual(stored)
    for (const message of sse.messages.filter((m) => m.event !== undefined)) {
      expect(message.event).toBe("pv.trust.event")
      expect(message.id).toBe(String(JSON.parse(message.data!).sequence))
      expect(message.data).not.toContain("\n")
    }
    const started = Date.now()
    await change(server, id)
    const [live] = (await sse.until((m) => eventsOf(m).length === 4)).filter((m) => m.event !== undefined).slice(3)
    expect(live!.at - started).toBeLessThan(1_000)
    expect(eventsOf(sse.messages).map((e) => e.sequence)).toEqual([1, 2, 3, 4])
    // Heartbeats: comment lines while nothing else is sent.
    await sse.until((m) => m.filter((x) => x.comments.includes("keep-alive")).length >= 2, 3_000)
    sse.close()
  })

  it("resumes after `after`, and after Last-Event-ID, which wins", async () => {
    const id = "DET-V1-STREAM-RESUME"
    for (let i = 0; i < 4; i++) await change(server, id)
    const fromTwo = await stream(`public_id=${id}&after=2`)
    await fromTwo.until((m) => eventsOf(m).length === 2)
    expect(eventsOf(fromTwo.messages).map((e) => e.sequence)).toEqual([3, 4])
    fromTwo.close()
    const resumed = await stream(`public_id=${id}&after=1`, { "last-event-id": "3" })
    await resumed.until((m) => eventsOf(m).length === 1)
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(eventsOf(resumed.messages).map((e) => e.sequence)).toEqual([4])
    resumed.close()
  })

  it("refuses what it cannot serve with problem+json", async () => {
    const id = "DET-V1-STREAM-RESUME"
    const problem = async (query: string, headers: Record<string, string> = {}, bearer = key.api_key) => {
      const reply = await request(server, "GET", `/api/v1/events/stream?${query}`, { bearer, headers })
      return reply
    }
    expectProblem(await problem("public_id=DET-V1-NOBODY-HOME"), 404, "determination-not-found")
    expectProblem(await problem("public_id=nope"), 400, "invalid-public-id")
    expectProblem(await problem(`public_id=${id}&after=-1`), 422, "validation-failed")
    expectProblem(await problem(`public_id=${id}`, { "last-event-id": "abc" }), 422, "validation-failed")
    expectProblem(await problem(`public_id=${id}`, { "last-event-id": "99999999999" }), 422, "validation-failed")
    const noScope = await createKey(server, ["receipt:read"])
    expectProblem(await problem(`public_id=${id}`, {}, noScope.api_key), 403, "insufficient-scope")
    expectProblem(await request(server, "GET", `/api/v1/events/stream?public_id=${id}`), 401, "unauthorized")
  })

  it("caps open streams per key (429 beyond) and never counts them against PV_MAX_IN_FLIGHT", async () => {
    const id = "DET-V1-STREAM-CAP"
    await change(server, id)
    const capped = await createKey(server, ["trust:read"])
    const open = await Promise.all([1, 2, 3].map(() => stream(`public_id=${id}`, {}, capped.api_key)))
    for (const sse of open) expect(sse.status, sse.text).toBe(200)
    await Promise.all(open.map((sse) => sse.until((m) => eventsOf(m).length === 1)))
    const refused = await request(server, "GET", `/api/v1/events/stream?public_id=${id}`, { bearer: capped.api_key })
    expectProblem(refused, 429, "rate-limited")
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    // Three streams are open on a server that works on at most 2 requests at once: ordinary requests still pass.
    for (let i = 0; i < 5; i++) {
      expect((await request(server, "GET", `/api/v1/events?public_id=${id}`, { bearer: key.api_key })).status).toBe(200)
    }
    open[0]!.close()
    await new Promise((resolve) => setTimeout(resolve, 300))
    const again = await stream(`public_id=${id}`, {}, capped.api_key)
    expect(again.status, again.text).toBe(200)
    for (const sse of [...open, again]) sse.close()
  })

  it("answers HEAD with 405 (Allow: GET) and opens nothing: 24 HEADs, then a GET of the same key still opens", async () => {
    const id = "DET-V1-STREAM-HEAD"
    await change(server, id)
    const own = await createKey(server, ["trust:read"])
    for (let i = 0; i < 24; i++) {
      const reply = await request(server, "HEAD", `/api/v1/events/stream?public_id=${id}`, { bearer: own.api_key })
      expect(reply.status, reply.text).toBe(405)
      expect(reply.headers.get("allow")).toBe("GET")
      expect(reply.headers.get("content-type")).toMatch(/^application\/problem\+json\b/)
      expect(reply.headers.get("x-request-id")).toBeTruthy()
      expect(reply.text).toBe("")
    }
    // Before authentication: without a key it is the same 405.
    const anonymous = await request(server, "HEAD", `/api/v1/events/stream?public_id=${id}`)
    expect(anonymous.status).toBe(405)
    expect(anonymous.headers.get("allow")).toBe("GET")
    await expectNoStreamOpen()
    const sse = await stream(`public_id=${id}`, {}, own.api_key)
    expect(sse.status, sse.text).toBe(200)
    await sse.until((m) => eventsOf(m).length === 1)
    sse.close()
    await expectNoStreamOpen()
  })

  it("frees a stream's slot at once when its client leaves before the first byte or while the body is written", async () => {
    const id = "DET-V1-STREAM-LEAVERS"
    await change(server, id)
    const own = await createKey(server, ["trust:read"])
    // The cap is 3 per key here: 3 times as many leavers of each kind, then every slot must be free again.
    for (let i = 0; i < 9; i++) await leaveStream(id, own.api_key, 0)
    await expectNoStreamOpen()
    // Leaving once the head and the first message arrived: the body was being written.
    for (let i = 0; i < 9; i++) await leaveStream(id, own.api_key, 1)
    await expectNoStreamOpen()
    const open = await Promise.all([1, 2, 3].map(() => stream(`public_id=${id}`, {}, own.api_key)))
    for (const sse of open) expect(sse.status, sse.text).toBe(200)
    await Promise.all(open.map((sse) => sse.until((m) => eventsOf(m).length === 1)))
    expect(await streamsOpen()).toBe(3)
    for (const sse of open) sse.close()
    await expectNoStreamOpen()
  })

  it("delivers what was appended while the change feed's LISTEN was down, within 2 s (PostgreSQL)", async () => {
    if (server.database !== "postgres") return
    // The default heartbeat (15 s): only the re-read once LISTEN is back can deliver in time.
    const listening = await startTestServer({ databaseUrl: server.databaseUrl! })
    const writer = await startTestServer({ databaseUrl: server.databaseUrl! })
    try {
      const database = new URL(server.databaseUrl!).pathname.slice(1)
      const listeners = () =>
        withAdmin((client) =>
          client.query("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'", [database]).then((r) => r.rowCount ?? 0)
        )
      // This file's server, `listening` and `writer` each hold one listener.
      expect(await pollUntil(listeners, (n) => n >= 3, { timeoutMs: 5_000 })).toBeGreaterThanOrEqual(3)
      const ownKey = await createKey(listening, ["trust:read"])
      const id = "DET-V1-STREAM-RELISTEN"
      await change(writer, id)
      const sse = await stream(`public_id=${id}`, {}, ownKey.api_key, listening)
      await sse.until((m) => eventsOf(m).length === 1)
      const terminated = await withAdmin((client) =>
        client.query(
          "SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'",
          [database]
        )
      )
      expect(terminated.rows.every((row: { done: boolean }) => row.done)).toBe(true)
      const started = Date.now()
      await change(writer, id)
      expect(Date.now() - started, "the append took longer than the listener's 1 s retry").toBeLessThan(1_000)
      const messages = await sse.until((m) => eventsOf(m).length === 2, 5_000)
      expect(messages.filter((m) => m.event !== undefined)[1]!.at - started).toBeLessThan(2_000)
      expect(eventsOf(sse.messages).map((e) => e.sequence)).toEqual([1, 2])
      sse.close()
      await expectNoStreamOpen(listening)
    } finally {
      await writer.close()
      await listening.close()
    }
  })

  it("hears of changes made on another instance (PostgreSQL)", async () => {
    if (server.database !== "postgres") return
    const second = await startTestServer({ databaseUrl: server.databaseUrl! })
    try {
      const id = "DET-V1-STREAM-OTHER"
      await change(server, id)
      const sse = await stream(`public_id=${id}`)
      await sse.until((m) => eventsOf(m).length === 1)
      const started = Date.now()
      await change(second, id)
      const messages = await sse.until((m) => eventsOf(m).length === 2)
      expect(messages.filter((m) => m.event !== undefined)[1]!.at - started).toBeLessThan(1_000)
      sse.close()
    } finally {
      await second.close()
    }
  })

  it("ends cleanly when the instance stops; a new stream resumes with Last-Event-ID", async () => {
    const own = await startTestServer()
    const ownKey = await createKey(own, ["trust:read"])
    const id = "DET-V1-STREAM-STOP"
    await change(own, id)
    const sse = await stream(`public_id=${id}`, {}, ownKey.api_key, own)
    await sse.until((m) => eventsOf(m).length === 1)
    const stopping = own.close()
    expect(await sse.ended).toBe("ended")
    await stopping
  })
})
