import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyWebhook } from "../../src/client/index.js"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, expectProblem, putDetermination, request } from "../support/http.js"
import { type Receiver, startReceiver } from "../support/receiver.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { isolatedConfig } from "../support/testConfig.js"

let server: TestServer
let receiver: Receiver
let key: { api_key: string }
const asOf = Date.now() - DAY_MS
const tiers = ["T1", "T2", "T3", "T4"] as const

beforeAll(async () => {
  receiver = await startReceiver()
  server = await startTestServer({ config: isolatedConfig({ PV_WEBHOOK_ALLOW_HTTP: "true", PV_WEBHOOK_ALLOW_PRIVATE: "true" }) })
  key = await createKey(server, ["subscription:write", "trust:read"])
})
afterAll(async () => {
  await server?.close()
  await receiver?.close()
})

describe(`no gap at the start (${testDatabaseKind()})`, () => {
  it("every event appended while subscriptions are made is at or below `after`, or owed", async () => {
    const publicId = "DET-V1-NO-GAP-0001"
    // What is delivered is not this test's concern, only what is owed: each of these subscriptions' first attempt
    // is answered 503 with Retry-After (an hour), so what it is owed stays owed, and the check below holds by
    // `after` or by what is owed alone, never by what a delivery moved. Delivered, the ~650 deliveries to the 64
    // subscriptions were most of this file's CPU.
    receiver.behaviour = (req) =>
      req.path.startsWith("/gap/") ? { kind: "answer", status: 503, headers: { "retry-after": "3600" } } : { kind: "answer", status: 204 }
    let n = 0
    expect((await putDetermination(server, publicId, determinationBody(asOf, { tier: "T1" }))).status).toBe(201)
    const made: Array<{ after: number; pendingThrough: number; id: string }> = []
    for (let round = 0; round < 8; round++) {
      const puts = Array.from({ length: 3 }, () => { n += 1; return putDetermination(server, publicId, determinationBody(asOf, { tier: tiers[n % 4]!, eligible: n % 2 === 0 })) })
      const subs = Array.from({ length: 8 }, (_, i) => request(server, "POST", "/api/v1/subscriptions", {
        bearer: key.api_key, body: { public_id: publicId, webhook_url: receiver.url(`/gap/${round}/${i}`) }
      }))
      const [, replies] = await Promise.all([Promise.all(puts), Promise.all(subs)])
      for (const reply of replies) {
        expect(reply.status, reply.text).toBe(201)
        made.push({ id: reply.body.subscription_id, after: reply.body.after, pendingThrough: 0 })
      }
    }
    const head = (await request(server, "GET", `/api/v1/events?public_id=${publicId}&limit=1000`, { bearer: key.api_key })).body.events.length
    for (const sub of made) {
      const body = (await request(server, "GET", `/api/v1/subscriptions/${sub.id}`, { bearer: key.api_key })).body
      // pending_through = delivered_through + pending: every sequence up to the head is covered by after or owed.
      expect(Math.max(body.after, body.delivered_through + body.pending), JSON.stringify(body)).toBe(head)
    }
  }, 120_000)
})

/**
 * The interleaving the one-statement insert exists for, forced rather than hoped for. PostgreSQL only: PGlite
 * is one serial connection, so an append and a subscribe never overlap there. From its own connection the test
 * holds a SHARE lock on log_pending; an append then stops at its log entry, after it has locked the
 * determination row, inserted the event and run the outbox `owe`, and before it commits. The subscribe is made
 * while the append is stopped there; the lock is released once the subscribe has either answered or is seen
 * waiting on the append (pg_blocking_pids). Reading the committed head and inserting separately, the
 * subscription answers at once with `after` = the old head, and the append's `owe` (which ran before it
 * existed) never covers it: the event is neither at or below `after` nor owed.
 */
describe(`no gap at the start, forced (${testDatabaseKind()})`, () => {
  it.skipIf(testDatabaseKind() !== "postgres")("an append stopped before its commit is at or below the new subscription's `after`, or owed", async () => {
    const publicId = "DET-V1-NO-GAP-FORCED"
    expect((await putDetermination(server, publicId, determinationBody(asOf, { tier: "T1" }))).status).toBe(201)
    const database = new URL(server.databaseUrl!).pathname.slice(1)
    const holder = new pg.Client({ connectionString: server.databaseUrl! })
    const watcher = new pg.Client({ connectionString: server.databaseUrl! })
    await holder.connect()
    await watcher.connect()
    let released = false
    const release = async () => {
      if (!released) await holder.query("ROLLBACK")
      released = true
    }
    try {
      const holderPid: number = (await holder.query("SELECT pg_backend_pid() AS pid")).rows[0].pid
      await holder.query("BEGIN")
      await holder.query("LOCK TABLE log_pending IN SHARE MODE")
      /** Backends of this database waiting on a lock `pid` holds, with what they run. */
      const blockedBy = (pid: number) =>
        watcher.query<{ pid: number; query: string }>(
          "SELECT pid, query FROM pg_stat_activity WHERE datname = $1 AND $2 = ANY(pg_blocking_pids(pid))",
          [database, pid]
        ).then((r) => r.rows)
      const poll = async <A>(what: string, probe: () => Promise<A | undefined>): Promise<A> => {
        const deadline = Date.now() + 15_000
        for (;;) {
          const found = await probe()
          if (found !== undefined) return found
          if (Date.now() > deadline) throw new Error(`${what}: not seen within 15 s`)
          await new Promise((resolve) => setTimeout(resolve, 10))
        }
      }
      const put = putDetermination(server, publicId, determinationBody(asOf, { tier: "T2" }))
      // The append, stopped at its log entry: the event is inserted and owed, its transaction still open.
      const append = await poll("the append waiting on log_pending", async () =>
        (await blockedBy(holderPid)).find((b) => /INSERT INTO log_pending/i.test(b.query)))
      let answered = false
      const subscribe = request(server, "POST", "/api/v1/subscriptions", {
        bearer: key.api_key, body: { public_id: publicId, webhook_url: receiver.url("/gap-forced") }
      }).finally(() => { answered = true })
      // Either the subscribe answered without waiting, or it waits on the append's row lock.
      await poll("the subscribe answered or waiting on the append", async () =>
        answered || (await blockedBy(append.pid)).some((b) => /INSERT INTO subscriptions/i.test(b.query)) ? true : undefined)
      await release()
      expect((await put).status).toBe(200)
      const created = await subscribe
      expect(created.status, created.text).toBe(201)
      const sub = (await request(server, "GET", `/api/v1/subscriptions/${created.body.subscription_id}`, { bearer: key.api_key })).body
      // pending_through = delivered_through + pending: event 2 is at or below `after`, or owed.
      expect(Math.max(sub.after, sub.delivered_through + sub.pending), JSON.stringify(sub)).toBe(2)
      if (sub.after >= 2) {
        const readable = await request(server, "GET", `/api/v1/events?public_id=${publicId}&limit=10`, { bearer: key.api_key })
        expect(readable.body.events.map((e: { sequence: number }) => e.sequence)).toContain(2)
      }
    } finally {
      await release()
      await holder.end()
      await watcher.end()
    }
  }, 60_000)
})

describe(`v1a signatures (${testDatabaseKind()})`, () => {
  it("serves the signing key, issues no secret for v1a, and signs deliveries the client verifies with it", async () => {
    const publicId = "DET-V1-V1A-0001"
    expect((await putDetermination(server, publicId, determinationBody(asOf, { tier: "T1" }))).status).toBe(201)
    const signing = await request(server, "GET", "/api/v1/webhooks/signing-key")
    expect(signing.status).toBe(200)
    expect(signing.body.public_key).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/)
    expect(signing.body.kid).toMatch(/^[0-9a-f]{16}$/)
    const created = await request(server, "POST", "/api/v1/subscriptions", {
      bearer: key.api_key, body: { public_id: publicId, webhook_url: receiver.url("/v1a"), signature_scheme: "v1a" }
    })
    expect(created.status, created.text).toBe(201)
    expect(created.body.signature_scheme).toBe("v1a")
    expect(created.body).not.toHaveProperty("webhook_secret")
    expectProblem(await request(server, "POST", `/api/v1/subscriptions/${created.body.subscription_id}/rotate-secret`, { bearer: key.api_key }), 404, "not-found")
    expect((await putDetermination(server, publicId, determinationBody(asOf, { tier: "T2" }))).status).toBe(200)
    const deadline = Date.now() + 15_000
    while (!receiver.received.some((r) => r.path === "/v1a") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
    const delivery = receiver.received.find((r) => r.path === "/v1a")!
    expect(delivery.headers["webhook-signature"]).toMatch(/^v1a,/)
    expect(verifyWebhook(signing.body.public_key, delivery.headers, delivery.body).ok).toBe(true)
  }, 60_000)

  it("refuses another scheme, and a scheme without webhook_url, at /signature_scheme, and changes nothing", async () => {
    const before = (await request(server, "GET", "/api/v1/subscriptions?limit=100", { bearer: key.api_key })).body.subscriptions.length
    for (const body of [
      { public_id: "DET-V1-V1A-0001", webhook_url: receiver.url("/bad"), signature_scheme: "v2" },
      { public_id: "DET-V1-V1A-0001", signature_scheme: "v1a" }
    ]) {
      const reply = await request(server, "POST", "/api/v1/subscriptions", { bearer: key.api_key, body })
      expectProblem(reply, 422, "validation-failed")
      expect(reply.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(["/signature_scheme"])
    }
    expect((await request(server, "GET", "/api/v1/subscriptions?limit=100", { bearer: key.api_key })).body.subscriptions.length).toBe(before)
  })
})
