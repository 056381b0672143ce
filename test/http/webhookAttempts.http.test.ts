import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { encodeTime } from "ulid"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { TrustEvent } from "../../src/domain/TrustEvent.js"
import { AttemptsKept } from "../../src/webhooks/Attempts.js"
import { pruneRound } from "../../src/webhooks/AttemptsPruner.js"
import { WebhookAttemptsRepo } from "../../src/webhooks/AttemptsRepo.js"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS } from "../support/fixtures.js"
import { createKey, expectProblem, request } from "../support/http.js"
import { type Received, type Receiver, startReceiver } from "../support/receiver.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { determinationChanges, loopbackWebhookConfig, until } from "../support/webhookHttp.js"

/**
 * Webhook attempts you can see and redelivery (docs/API.md §10.5, contract §14), over HTTP against the real
 * server layers and a real loopback receiver (test/support/receiver.ts).
 */

let server: TestServer
let receiver: Receiver
let key: { api_key: string; key_id: string; tenant_id: string }
let reader: { api_key: string }
const asOf = Date.now() - DAY_MS

/** One stored change of `publicId`, hence exactly one new event. */
const change = determinationChanges(() => server, asOf)

const subscribe = async (publicId: string, path: string) => {
  const reply = await request(server, "POST", "/api/v1/subscriptions", { bearer: key.api_key, body: { public_id: publicId, webhook_url: receiver.url(path) } })
  expect(reply.status, reply.text).toBe(201)
  return reply.body as { subscription_id: string; after: number }
}

const status = async (subscriptionId: string) => {
  const reply = await request(server, "GET", `/api/v1/subscriptions/${subscriptionId}`, { bearer: key.api_key })
  expect(reply.status, reply.text).toBe(200)
  return reply.body
}

const attemptsOf = async (subscriptionId: string, query = "", bearer = key.api_key) =>
  request(server, "GET", `/api/v1/subscriptions/${subscriptionId}/attempts${query}`, { bearer })

const redeliver = (subscriptionId: string, body: unknown, bearer = key.api_key) =>
  request(server, "POST", `/api/v1/subscriptions/${subscriptionId}/redeliver`, { bearer, body })

/** A webhook subscription to `path` made after the chain's first event, then `events` more, all acknowledged. */
const deliveredSubscription = async (publicId: string, path: string, events: number) => {
  await change(publicId)
  const made = await subscribe(publicId, path)
  for (let i = 0; i < events; i++) await change(publicId)
  await until("delivered", () => status(made.subscription_id), (s) => s.pending === 0 && s.delivered_through === events + 1)
  return made
}

const eventsOf = async (publicId: string): Promise<Array<TrustEvent>> =>
  (await request(server, "GET", `/api/v1/events?public_id=${publicId}&limit=100`, { bearer: reader.api_key })).body.events

const to = (path: string) => receiver.received.filter((r) => r.path === path)
const sequencesOf = (received: ReadonlyArray<Received>) => received.map((r) => (JSON.parse(r.body).event as TrustEvent).sequence)

beforeAll(async () => {
  receiver = await startReceiver()
  server = await startTestServer({ config: loopbackWebhookConfig({ PV_WEBHOOK_TIMEOUT_MS: "2500", PV_WEBHOOK_MAX_FAILURE_SECONDS: "2" }) })
  key = await createKey(server, ["subscription:write", "trust:read"])
  reader = await createKey(server, ["trust:read"])
})
afterAll(async () => {
  await server?.close()
  await receiver?.close()
})

describe(`webhook attempts (${testDatabaseKind()})`, () => {
  it("lists every attempt newest first: failures, then the success, each with its event, status, outcome and error", async () => {
    const id = "DET-V1-ATT-LIST"
    await change(id)
    const made = await subscribe(id, "/list")
    let failures = 0
    receiver.behaviour = (r) => r.path === "/list" && failures++ < 2 ? { kind: "answer", status: 503 } : { kind: "answer", status: 204 }
    await change(id)
    await until("delivered", () => status(made.subscription_id), (s) => s.pending === 0)
    const reply = await attemptsOf(made.subscription_id)
    expect(reply.status, reply.text).toBe(200)
    const [event] = (await eventsOf(id)).slice(1)
    expect(reply.body.next_after).toBeNull()
    expect(reply.body.attempts).toEqual([
      { attempt_id: expect.stringMatching(/^att_[0-9A-HJKMNP-TV-Z]{26}$/), event_id: event!.event_id, sequence: event!.sequence,
        started_at: expect.any(String), duration_ms: expect.any(Number), status: 204, outcome: "delivered", error: null },
      ...[1, 2].map(() => ({ attempt_id: expect.any(String), event_id: event!.event_id, sequence: event!.sequence,
        started_at: expect.any(String), duration_ms: expect.any(Number), status: 503, outcome: "failed", error: "HTTP 503" }))
    ])
    const attempts: Array<{ attempt_id: string; started_at: string; duration_ms: number }> = reply.body.attempts
    // Newest first, by id and by start; each started when the receiver saw it (give or take the machine's load).
    expect(attempts.map((a) => a.attempt_id)).toEqual(attempts.map((a) => a.attempt_id).sort().reverse())
    const starts = attempts.map((a) => Date.parse(a.started_at))
    expect(starts).toEqual([...starts].sort((a, b) => b - a))
    for (const [i, seen] of to("/list").reverse().entries()) {
      expect(new Date(starts[i]!).toISOString()).toBe(attempts[i]!.started_at)
      expect(Math.abs(seen.at - starts[i]!)).toBeLessThan(1_000)
      expect(attempts[i]!.duration_ms).toBeGreaterThanOrEqual(0)
      expect(attempts[i]!.duration_ms).toBeLessThan(1_000)
    }
    // The subscription's own view agrees with the newest attempt.
    expect(await status(made.subscription_id)).toMatchObject({ attempts: 0, last_error: null })
    receiver.behaviour = () => ({ kind: "answer", status: 204 })
  })

  it("records a time-out, a redirect and a closed connection with their outcomes", async () => {
    const id = "DET-V1-ATT-OUTCOMES"
    await change(id)
    const cases = [
      { path: "/hang", behaviour: { kind: "hang" as const }, expected: { outcome: "timeout", status: null, error: expect.stringMatching(/timed out/) } },
      {
        path: "/moved",
        behaviour: { kind: "answer" as const, status: 302, headers: { location: "http://127.0.0.1:1/elsewhere" } },
        expected: { outcome: "refused", status: 302, error: "redirect 302 not followed" }
      },
      { path: "/closed", behaviour: { kind: "close" as const }, expected: { outcome: "failed", status: null, error: expect.any(String) } }
    ]
    receiver.behaviour = (r) => cases.find((c) => c.path === r.path)?.behaviour ?? { kind: "answer", status: 204 }
    const made = await Promise.all(cases.map((c) => subscribe(id, c.path)))
    await change(id)
    for (const [i, c] of cases.entries()) {
      const reply = await until(`${c.path} attempted`, () => attemptsOf(made[i]!.subscription_id), (r) => r.body.attempts.length >= 1)
      expect(reply.body.attempts[0], c.path).toMatchObject(c.expected)
    }
    for (const m of made) await request(server, "DELETE", `/api/v1/subscriptions/${m.subscription_id}`, { bearer: key.api_key })
    receiver.behaviour = () => ({ kind: "answer", status: 204 })
  })

  it("pages newest first with limit and after; bad query values are 422 with their pointers; another tenant's is 404", async () => {
    const id = "DET-V1-ATT-PAGES"
    const made = await deliveredSubscription(id, "/pages", 5)
    const all = (await attemptsOf(made.subscription_id, "?limit=1000")).body
    expect(all.attempts.map((a: { sequence: number }) => a.sequence)).toEqual([6, 5, 4, 3, 2])
    const seen: Array<string> = []
    let after: string | null = null
    for (let pages = 0; pages < 10; pages++) {
      const page = await attemptsOf(made.subscription_id, `?limit=2${after === null ? "" : `&after=${after}`}`)
      expect(page.status, page.text).toBe(200)
      expect(page.body.attempts.length).toBeLessThanOrEqual(2)
      seen.push(...page.body.attempts.map((a: { attempt_id: string }) => a.attempt_id))
      after = page.body.next_after
      if (after === null) break
      expect(after).toBe(page.body.attempts.at(-1).attempt_id)
    }
    expect(seen).toEqual(all.attempts.map((a: { attempt_id: string }) => a.attempt_id))

    for (const [query, pointer] of [
      ["?limit=1001", "/limit"], ["?limit=0", "/limit"], ["?limit=abc", "/limit"], ["?limit=-1", "/limit"],
      ["?after=att_nope", "/after"], ["?after=%00", "/after"], [`?after=${made.subscription_id}`, "/after"]
    ] as const) {
      const reply = await attemptsOf(made.subscription_id, query)
      expectProblem(reply, 422, "validation-failed")
      expect(reply.body.errors.map((e: { pointer: string }) => e.pointer), query).toEqual([pointer])
    }
    const other = await createKey(server, ["subscription:write"], { tenant_id: "tenant-att-other" })
    expectProblem(await attemptsOf(made.subscription_id, "", other.api_key), 404, "not-found")
    expectProblem(await redeliver(made.subscription_id, { from_sequence: 2 }, other.api_key), 404, "not-found")
    expectProblem(await attemptsOf("sub_01JZZZZZZZZZZZZZZZZZZZZZZZ"), 404, "not-found")
    expectProblem(await attemptsOf("%00"), 404, "not-found")
    expectProblem(await attemptsOf(made.subscription_id, "", reader.api_key), 403, "insufficient-scope")
    expectProblem(await redeliver(made.subscription_id, { from_sequence: 2 }, reader.api_key), 403, "insufficient-scope")
    // A pull subscription has no attempts.
    const pull = await request(server, "POST", "/api/v1/subscriptions", { bearer: key.api_key, body: { public_id: id } })
    expect((await attemptsOf(pull.body.subscription_id)).body).toEqual({ attempts: [], next_after: null })
  })

  it("redelivers from n, in order, with the original webhook-id, and records those attempts", async () => {
    const id = "DET-V1-ATT-REDO"
    const made = await deliveredSubscription(id, "/redo", 4)
    const first = to("/redo")
    expect(sequencesOf(first)).toEqual([2, 3, 4, 5])

    const reply = await redeliver(made.subscription_id, { from_sequence: 3 })
    expect(reply.status, reply.text).toBe(202)
    expect(reply.body).toMatchObject({ subscription_id: made.subscription_id, status: "active", delivered_through: 2, pending: 3 })
    const received = await receiver.waitFor(7, "/redo")
    expect(sequencesOf(received)).toEqual([2, 3, 4, 5, 3, 4, 5])
    const stored = await eventsOf(id)
    for (const r of received) {
      const event = JSON.parse(r.body).event as TrustEvent
      expect(r.headers["webhook-id"]).toBe(event.event_id)
      expect(event).toEqual(stored[event.sequence - 1])
    }
    expect(receiver.maxConcurrentByPath.get("/redo")).toBe(1)
    await until("caught up", () => status(made.subscription_id), (s) => s.pending === 0 && s.delivered_through === 5)
    const attempts = (await attemptsOf(made.subscription_id)).body.attempts
    expect(attempts.map((a: { sequence: number; outcome: string }) => `${a.sequence}:${a.outcome}`))
      .toEqual(["5:delivered", "4:delivered", "3:delivered", "5:delivered", "4:delivered", "3:delivered", "2:delivered"])

    // From 1, before the subscription's `after`: the whole chain, in order.
    expect((await redeliver(made.subscription_id, { from_sequence: 1 })).status).toBe(202)
    expect(sequencesOf(await receiver.waitFor(12, "/redo")).slice(7)).toEqual([1, 2, 3, 4, 5])
  })

  it("a redelivery asked for while an attempt is in flight comes after that attempt, one at a time", async () => {
    const id = "DET-V1-ATT-INFLIGHT"
    const made = await deliveredSubscription(id, "/inflight", 2)
    receiver.behaviour = (r) => r.path === "/inflight" ? { kind: "answer", status: 200, delayMs: 1_500 } : { kind: "answer", status: 204 }
    await change(id)
    await receiver.waitFor(3, "/inflight")
    // Sequence 4 is in flight now (its answer comes in 1.5 s): the redelivery waits for its outcome.
    const reply = await redeliver(made.subscription_id, { from_sequence: 2 })
    expect(reply.status, reply.text).toBe(202)
    expect(reply.body).toMatchObject({ delivered_through: 3, pending: 1 })
    const received = await receiver.waitFor(6, "/inflight", 15_000)
    expect(sequencesOf(received)).toEqual([2, 3, 4, 2, 3, 4])
    expect(receiver.maxConcurrentByPath.get("/inflight")).toBe(1)
    await until("caught up", () => status(made.subscription_id), (s) => s.pending === 0 && s.delivered_through === 4)
    await new Promise((resolve) => setTimeout(resolve, 800))
    expect(to("/inflight")).toHaveLength(6)
    receiver.behaviour = () => ({ kind: "answer", status: 204 })
  })

  it("a redelivery resumes a disabled subscription", async () => {
    const id = "DET-V1-ATT-DISABLED"
    await change(id)
    const made = await subscribe(id, "/disabled")
    let broken = true
    receiver.behaviour = (r) => r.path === "/disabled" && broken ? { kind: "answer", status: 500 } : { kind: "answer", status: 204 }
    await change(id)
    await until("disabled", () => status(made.subscription_id), (s) => s.status === "disabled", 20_000)
    const failedCount = to("/disabled").length
    broken = false
    const reply = await redeliver(made.subscription_id, { from_sequence: 1 })
    expect(reply.status, reply.text).toBe(202)
    expect(reply.body).toMatchObject({ status: "active", attempts: 0, delivered_through: 0, pending: 2 })
    const received = await receiver.waitFor(failedCount + 2, "/disabled")
    expect(sequencesOf(received.slice(failedCount))).toEqual([1, 2])
    await until("caught up", () => status(made.subscription_id), (s) => s.pending === 0 && s.status === "active")
    const outcomes = (await attemptsOf(made.subscription_id)).body.attempts.map((a: { outcome: string; status: number | null }) => a.outcome)
    expect(outcomes.slice(0, 2)).toEqual(["delivered", "delivered"])
    expect(outcomes.slice(2).every((o: string) => o === "failed")).toBe(true)
    receiver.behaviour = () => ({ kind: "answer", status: 204 })
  })

  it("a refused redelivery is a 422 with its pointer and changes nothing", async () => {
    const id = "DET-V1-ATT-REFUSED"
    const made = await deliveredSubscription(id, "/refused", 1)
    const before = await status(made.subscription_id)
    const attemptsBefore = (await attemptsOf(made.subscription_id)).body
    const bodies: ReadonlyArray<readonly [unknown, string]> = [
      [{ from_sequence: 0 }, "/from_sequence"],
      [{ from_sequence: 3 }, "/from_sequence"],
      [{ from_sequence: -1 }, "/from_sequence"],
      [{ from_sequence: 1.5 }, "/from_sequence"],
      [{ from_sequence: "1" }, "/from_sequence"],
      [{ from_sequence: 1e20 }, "/from_sequence"],
      [{ from_sequence: null }, "/from_sequence"],
      [{}, "/from_sequence"],
      [{ from_sequence: 1, extra: true }, "/extra"]
    ]
    for (const [body, pointer] of bodies) {
      const reply = await redeliver(made.subscription_id, body)
      expectProblem(reply, 422, "validation-failed")
      expect(reply.body.errors.map((e: { pointer: string }) => e.pointer), JSON.stringify(body)).toEqual([pointer])
    }
    const pull = await request(server, "POST", "/api/v1/subscriptions", { bearer: key.api_key, body: { public_id: id } })
    const refusedPull = await redeliver(pull.body.subscription_id, { from_sequence: 1 })
    expectProblem(refusedPull, 422, "validation-failed")
    expect(refusedPull.body.errors).toEqual([{ pointer: "", detail: expect.stringMatching(/pull subscription/) }])
    expectProblem(await redeliver("sub_01JZZZZZZZZZZZZZZZZZZZZZZZ", { from_sequence: 1 }), 404, "not-found")
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    expect(await status(made.subscription_id)).toEqual(before)
    expect((await attemptsOf(made.subscription_id)).body).toEqual(attemptsBefore)
    expect(to("/refused")).toHaveLength(1)
  })

  it("the prune loop's repair carries on a redelivery whose worker died before recording the attempt in flight", async () => {
    const id = "DET-V1-ATT-STRANDED"
    const made = await deliveredSubscription(id, "/stranded", 2)
    // What a worker that died between its acknowledgement and the attempt's record leaves: a pending
    // redelivery on a row no attempt holds, with nothing owed (so no claim would ever apply it).
    await server.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE subscriptions SET redeliver_from = 2 WHERE subscription_id = ${made.subscription_id}`
    }))
    const round = await server.run(Effect.provide(pruneRound, WebhookAttemptsRepo.layer))
    expect(round.redelivered).toBe(1)
    expect(sequencesOf(await receiver.waitFor(4, "/stranded"))).toEqual([2, 3, 2, 3])
    await until("caught up", () => status(made.subscription_id), (s) => s.pending === 0 && s.delivered_through === 3)
    expect((await server.run(Effect.provide(pruneRound, WebhookAttemptsRepo.layer))).redelivered).toBe(0)
  })

  it(`keeps the newest ${AttemptsKept} attempts of each subscription; the rest go with the subscription`, async () => {
    const id = "DET-V1-ATT-PRUNE"
    const made = await deliveredSubscription(id, "/prune", 1)
    const [real] = (await attemptsOf(made.subscription_id)).body.attempts
    // 150 older attempts written directly (as a long-failing receiver would have left them), then the prune.
    const base = Date.parse(real.started_at) - 1_000_000
    const older = Array.from({ length: 150 }, (_, i) => `att_${encodeTime(base + i * 1000, 10)}0000000000000000`)
    await server.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      for (const [i, attemptId] of older.entries()) {
        yield* sql`
          INSERT INTO webhook_attempts (attempt_id, subscription_id, event_id, sequence, started_at, duration_ms, status, outcome, error)
          VALUES (${attemptId}, ${made.subscription_id}, ${real.event_id}, ${real.sequence}, ${new Date(base + i * 1000)}, 5, 503, 'failed', 'HTTP 503')`
      }
    }))
    expect((await attemptsOf(made.subscription_id, "?limit=1000")).body.attempts).toHaveLength(151)
    const pruned = await server.run(Effect.provide(Effect.flatMap(WebhookAttemptsRepo, (repo) => repo.prune(AttemptsKept)), WebhookAttemptsRepo.layer))
    expect(pruned).toBe(51)
    const kept = (await attemptsOf(made.subscription_id, "?limit=1000")).body.attempts
    expect(kept).toHaveLength(AttemptsKept)
    expect(kept[0]).toEqual(real)
    expect(kept.at(-1).attempt_id).toBe(older[51])
    // Nothing more to prune: a second round (another instance's, say) deletes nothing.
    expect(await server.run(Effect.provide(Effect.flatMap(WebhookAttemptsRepo, (repo) => repo.prune(AttemptsKept)), WebhookAttemptsRepo.layer))).toBe(0)

    expect((await request(server, "DELETE", `/api/v1/subscriptions/${made.subscription_id}`, { bearer: key.api_key })).status).toBe(204)
    const left = await server.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_attempts WHERE subscription_id = ${made.subscription_id}`
    }))
    expect(left[0]!.n).toBe(0)
  })
})
