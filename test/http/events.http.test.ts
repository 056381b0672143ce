import { generateKeyPairSync } from "node:crypto"
import { Cause, Effect, Exit, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyEventChain } from "../../src/client/index.js"
import { PublicId, requirePublicId } from "../../src/domain/PublicId.js"
import type { TrustEvent } from "../../src/domain/TrustEvent.js"
import { EventLog } from "../../src/events/EventLog.js"
import { Subscriptions } from "../../src/webhooks/Subscriptions.js"
import { Determinations } from "../../src/trust/Determinations.js"
import { verifyEventsCommand } from "../../src/events/VerifyCommand.js"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request, expectProblem } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

let server: TestServer
let reader: { api_key: string; key_id: string; tenant_id: string }
let asOf: number

const feedPage = (publicId: string, query = "", bearer = reader.api_key) =>
  request(server, "GET", `/api/v1/events?public_id=${publicId}${query}`, { bearer })

/** Every event of a chain, following next_after, with the head of the last page. */
const wholeFeed = async (publicId: string, limit?: number) => {
  const events: Array<TrustEvent> = []
  let after = 0
  let pages = 0
  for (;;) {
    const reply = await feedPage(publicId, `&after=${after}${limit === undefined ? "" : `&limit=${limit}`}`)
    expect(reply.status, reply.text).toBe(200)
    pages++
    events.push(...reply.body.events)
    if (reply.body.next_after === null) return { events, head: reply.body.head, pages }
    expect(reply.body.next_after).toBe(reply.body.events[reply.body.events.length - 1].sequence)
    after = reply.body.next_after
  }
}

const jwks = async () => (await request(server, "GET", "/api/v1/events/keys")).body

const trustDocument = async (publicId: string) => (await request(server, "GET", `/api/v1/trust/${publicId}/human`)).body

/** One freshness sweep (the writer of trust state announces each boundary crossed); the number of events appended. */
const sweepOnce = Effect.flatMap(Determinations, (d) => d.sweepOnce)


beforeAll(async () => {
  server = await startTestServer()
  asOf = Date.now() - DAY_MS
  reader = await createKey(server, ["trust:read", "subscription:write"])
})
afterAll(() => server?.close())

describe(`event feed (${testDatabaseKind()})`, () => {
  it("records each stored change as one signed event that verifies against the published keys", async () => {
    const id = "DET-V1-EVENTS-0001"
    expect((await putDetermination(server, id, determinationBody(asOf))).status).toBe(201)
    expect((await putDetermination(server, id, determinationBody(asOf, { tier: "T3", eligible: false }))).status).toBe(200)
    // Same body again: no new version, no event.
    expect((await putDetermination(server, id, determinationBody(asOf, { tier: "T3", eligible: false }))).body.outcome).toBe("unchanged")
    // A lifecycle change (with another field) is one lifecycle.changed event, not two.
    expect((await putDetermination(server, id, determinationBody(asOf, { tier: "T3", eligible: false, lifecycle_state: "SUSPENDED", limitations: [] }))).status).toBe(200)

    const reply = await feedPage(id)
    expect(reply.status).toBe(200)
    const page = reply.body
    expect(page.public_id).toBe(id)
    expect(page.next_after).toBeNull()
    expect(page.events.map((e: TrustEvent) => [e.sequence, e.type])).toEqual([
      [1, "determination.recorded"], [2, "determination.updated"], [3, "lifecycle.changed"]
    ])
    const [recorded, updated, lifecycle] = page.events as Array<TrustEvent>
    expect(recorded!.previousEventHash).toBeNull()
    expect(recorded!.event_id).toMatch(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/)
    expect(recorded!.occurred_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(recorded!.payload).toMatchObject({ version: 1, lifecycle_state: "NOT_ISSUED", freshness_state: "CURRENT" })
    expect(updated!.payload).toMatchObject({ version: 2, changed_fields: ["eligible", "tier"] })
    expect(lifecycle!.payload).toMatchObject({
      version: 3, previous_lifecycle_state: "NOT_ISSUED", lifecycle_state: "SUSPENDED", changed_fields: ["lifecycle_state", "limitations"]
    })
    expect(updated!.previousEventHash).toBe(recorded!.eventHash)

    const keys = await jwks()
    expect(keys.keys).toContainEqual(expect.objectContaining({ kty: "OKP", crv: "Ed25519", kid: recorded!.signature.kid, use: "sig", alg: "Ed25519" }))
    expect(verifyEventChain(page.events, keys, { publicId: id, head: page.head })).toMatchObject({ ok: true, count: 3 })

    const document = await trustDocument(id)
    expect(document.integrity.event_head).toEqual(page.head)
    expect(page.head).toEqual({ sequence: 3, eventHash: lifecycle!.eventHash })
    expect(document.determination.determination_id).toBe(lifecycle!.payload.determination_id)
  })

  it("50 simultaneous updates of one determination give sequences 1..51, gapless and unique", async () => {
    const id = "DET-V1-EVENTS-RACE"
    expect((await putDetermination(server, id, determinationBody(asOf))).status).toBe(201)
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) =>
      putDetermination(server, id, determinationBody(asOf, { why_this_tier: [`concurrent reason ${i}`] }))))
    expect(replies.map((r) => r.status)).toEqual(Array(50).fill(200))
    expect(new Set(replies.map((r) => r.body.version)).size).toBe(50)

    const { events, head } = await wholeFeed(id)
    expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: 51 }, (_, i) => i + 1))
    expect(new Set(events.map((e) => e.event_id)).size).toBe(51)
    // Each writer saw the version committed just before it: one changed field each, never "everything".
    expect(events.slice(1).map((e) => [e.type, e.payload.changed_fields])).toEqual(Array(50).fill(["determination.updated", ["why_this_tier"]]))
    expect(verifyEventChain(events, await jwks(), { publicId: id, head })).toMatchObject({ ok: true, count: 51 })
    expect(head.sequence).toBe(51)
    expect((await trustDocument(id)).integrity.event_head).toEqual(head)

    // Ten identical bodies at once: one stored change, one event; the rest are unchanged.
    const same = await Promise.all(Array.from({ length: 10 }, () =>
      putDetermination(server, id, determinationBody(asOf, { why_this_tier: ["one more"] }))))
    expect(same.map((r) => r.body.outcome).sort()).toEqual([...Array(9).fill("unchanged"), "updated"])
    expect((await feedPage(id)).body.head.sequence).toBe(52)
  })

  it("pages through a chain of 1,000+ events: each event once, in order, verifiable end to end", async () => {
    const id = "DET-V1-EVENTS-LONG"
    const total = 1005
    expect((await putDetermination(server, id, determinationBody(asOf))).status).toBe(201)
    // A thousand PUTs would take half a minute on PGlite; the rest go through the same append the PUT uses,
    // from concurrent transactions, so the chain is still built under contention. Each transaction holds the
    // chain's lock while it appends: 25 appends each keep the others' waits far below the query time-out
    // (PV_DB_QUERY_TIMEOUT_MS, 10 s) on a loaded machine, where a waiter behind 251 once timed out.
    const appendMany = (from: number, count: number) =>
      server.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        Effect.forEach(Array.from({ length: Math.ceil(count / 25) }, (_, t) => from + t * 25), (start) =>
          sql.withTransaction(Effect.flatMap(EventLog, (log) =>
            Effect.forEach(Array.from({ length: Math.min(25, from + count - start) }, (_, i) => start + i), (i) =>
              log.append(PublicId.make(id), "determination.updated", { changed_fields: ["why_not_higher"], synthetic: i })))), { discard: true })))
    await Promise.all(Array.from({ length: 4 }, (_, batch) => appendMany(batch * 251, 251)))
    const { events: built } = await wholeFeed(id, 1000)
    expect(built.length).toBe(total)
    const byDefault = await wholeFeed(id)
    expect(byDefault.pages).toBe(Math.ceil(total / 100))
    expect(byDefault.events.map((e) => e.sequence)).toEqual(Array.from({ length: total }, (_, i) => i + 1))
    expect(byDefault.head.sequence).toBe(total)

    const largest = await wholeFeed(id, 1000)
    expect(largest.pages).toBe(2)
    expect(largest.events).toEqual(byDefault.events)

    const odd = await wholeFeed(id, 333)
    expect(odd.events.map((e) => e.event_id)).toEqual(byDefault.events.map((e) => e.event_id))

    const tail = await feedPage(id, `&after=${total - 2}`)
    expect(tail.body.events.map((e: TrustEvent) => e.sequence)).toEqual([total - 1, total])
    expect(tail.body.next_after).toBeNull()
    const beyond = await feedPage(id, `&after=${total + 10}`)
    expect(beyond.body).toMatchObject({ events: [], next_after: null, head: byDefault.head })

    expect((await trustDocument(id)).integrity.event_head).toEqual(byDefault.head)
    const verdict = await Effect.runPromise(verifyEventsCommand({ baseUrl: server.baseUrl, apiKey: reader.api_key, publicId: id }))
    expect(verdict).toMatchObject({ ok: true, count: total, head: byDefault.head })
  })

  it("serves a page with an ETag naming its head: 304 while the chain stands, a new page once it moves", async () => {
    const id = "DET-V1-EVENTS-ETAG"
    for (let i = 0; i < 3; i++) {
      expect([200, 201]).toContain((await putDetermination(server, id, determinationBody(asOf, { tier: (["T1", "T2", "T3"] as const)[i]! }))).status)
    }
    const first = await feedPage(id, "&limit=2")
    expect(first.status).toBe(200)
    const etag = first.headers.get("etag")!
    expect(etag).toMatch(/^"[^"]+"$/)
    expect(first.headers.get("cache-control")).toBe("no-cache")
    const again = await feedPage(id, "&limit=2")
    expect(again.text).toBe(first.text)
    expect(again.headers.get("etag")).toBe(etag)
    const revalidated = await request(server, "GET", `/api/v1/events?public_id=${id}&limit=2`, { bearer: reader.api_key, headers: { "if-none-match": etag } })
    expect(revalidated.status).toBe(304)
    expect(revalidated.text).toBe("")
    expect(revalidated.headers.get("etag")).toBe(etag)
    // Another page (other `after` or `limit`) has another tag.
    expect((await feedPage(id, "&limit=3")).headers.get("etag")).not.toBe(etag)
    // The chain moves: the old tag no longer matches, and the new page reports the new head.
    expect((await putDetermination(server, id, determinationBody(asOf, { tier: "T4" }))).status).toBe(200)
    const moved = await request(server, "GET", `/api/v1/events?public_id=${id}&limit=2`, { bearer: reader.api_key, headers: { "if-none-match": etag } })
    expect(moved.status).toBe(200)
    expect(moved.body.head.sequence).toBe(4)
    expect(moved.body.events).toEqual(first.body.events)
    expect(moved.headers.get("etag")).not.toBe(etag)
  })

  it("checks its parameters, key and scope; the JWKS needs no key", async () => {
    const id = "DET-V1-EVENTS-0001"
    expect((await feedPage(id, "&limit=1000")).status).toBe(200)
    expectProblem(await feedPage(id, "&limit=1001"), 422, "validation-failed")
    expect((await feedPage(id, "&limit=1001")).body.errors).toEqual([{ pointer: "/limit", detail: "must be an integer between 1 and 1000" }])
    expect((await feedPage(id, "&after=x")).body.errors).toEqual([{ pointer: "/after", detail: "must be an integer from 0 to 2147483647" }])
    expectProblem(await feedPage(id, "&limit=0"), 422, "validation-failed")
    expectProblem(await feedPage(id, "&after=-1"), 422, "validation-failed")
    expectProblem(await feedPage(id, "&after=abc"), 422, "validation-failed")
    expectProblem(await request(server, "GET", "/api/v1/events", { bearer: reader.api_key }), 422, "validation-failed")
    expectProblem(await feedPage("det-v1-lowercase"), 400, "invalid-public-id")
    expectProblem(await feedPage("DET-V1-NOBODY-HOME"), 404, "determination-not-found")
    expectProblem(await request(server, "GET", `/api/v1/events?public_id=${id}`), 401, "unauthorized")
    const receiptOnly = await createKey(server, ["receipt:read"])
    const forbidden = await feedPage(id, "", receiptOnly.api_key)
    expectProblem(forbidden, 403, "insufficient-scope")
    expect(forbidden.headers.get("www-authenticate")).toContain(`scope="trust:read"`)

    const keys = await request(server, "GET", "/api/v1/events/keys")
    expect(keys.status).toBe(200)
    expect(keys.body.keys.length).toBeGreaterThanOrEqual(1)
    for (const key of keys.body.keys) {
      expect(Object.keys(key).sort()).toEqual(["alg", "crv", "kid", "kty", "use", "x"])
      expect(key.kid).toMatch(/^[0-9a-f]{16}$/)
    }
  })

  it("subscriptions are idempotent per key, tenant-owned, and point at the events after the head", async () => {
    const id = "DET-V1-EVENTS-0001"
    const subscriber = { key_id: reader.key_id, tenant_id: reader.tenant_id }
    // Decoded at the edge as the HTTP handler does; the service takes a PublicId.
    const subscribing = (who: typeof subscriber, publicId = id) =>
      Effect.flatMap(requirePublicId(publicId), (decoded) => Effect.flatMap(Subscriptions, (s) => Effect.map(s.subscribe(who, decoded), (made) => made.subscription)))
    const subscribe = (who: typeof subscriber, publicId = id) => server.run(subscribing(who, publicId))
    const head = (await feedPage(id)).body.head

    const first = await subscribe(subscriber)
    expect(first).toEqual({
      subscription_id: expect.stringMatching(/^sub_[0-9A-HJKMNP-TV-Z]{26}$/),
      public_id: id,
      delivery: "pull",
      after: head.sequence,
      events_url: `/api/v1/events?public_id=${id}&after=${head.sequence}`,
      status: "active",
      disabled_reason: null,
      created_at: expect.stringMatching(/Z$/),
      // A pull subscription has nothing acknowledged or owed: the reader keeps its own place.
      delivered_through: null,
      pending: null,
      attempts: 0,
      last_attempt_at: null,
      last_error: null,
      next_attempt_at: null
    })
    const racing = await Promise.all(Array.from({ length: 5 }, () => subscribe(subscriber)))
    expect(racing).toEqual(Array(5).fill(first))

    expect((await putDetermination(server, id, determinationBody(asOf, { tier: "T4" }))).status).toBe(200)
    expect(await subscribe(subscriber)).toEqual(first)
    const changes = await request(server, "GET", first.events_url, { bearer: reader.api_key })
    expect(changes.body.events.map((e: TrustEvent) => e.sequence)).toEqual([head.sequence + 1])

    const otherKey = await createKey(server, ["subscription:write"], { tenant_id: "tenant-b" })
    const theirs = await subscribe({ key_id: otherKey.key_id, tenant_id: otherKey.tenant_id })
    expect(theirs.subscription_id).not.toBe(first.subscription_id)
    expect(theirs.after).toBe(head.sequence + 1)

    const get = (tenant: string, subscriptionId: string) =>
      server.run(Effect.exit(Effect.flatMap(Subscriptions, (s) => s.get(tenant, subscriptionId))))
    expect(await get(reader.tenant_id, first.subscription_id)).toEqual(Exit.succeed(first))
    const crossTenant = await get("tenant-b", first.subscription_id)
    // A single typed failure, NotFound (Effect 4 causes are a flat list of reasons).
    const reasons = Exit.isFailure(crossTenant) ? crossTenant.cause.reasons : []
    expect(reasons.length === 1 && Cause.isFailReason(reasons[0]!) && reasons[0].error._tag).toBe("NotFound")

    const unknown = await server.run(Effect.flip(subscribing(subscriber, "DET-V1-NOBODY-HOME")))
    expect(unknown._tag).toBe("DeterminationNotFound")
    const malformed = await server.run(Effect.flip(subscribing(subscriber, "nope")))
    expect(malformed._tag).toBe("InvalidPublicId")
  })

  // Runs last: it moves the server's clock far ahead.
  it("the freshness sweep announces each boundary once, even with sweeps running at once", async () => {
    const start = Date.now() - DAY_MS
    const ids = Array.from({ length: 6 }, (_, i) => `DET-V1-EVENTS-FRESH-${i}`)
    // valid_until = as_of + 100 d: APPROACHING_STALE at 80 d, STALE at 100 d, EXPIRED at 200 d.
    for (const id of ids) expect((await putDetermination(server, id, determinationBody(start))).status).toBe(201)
    const sweepTwiceAtOnce = () =>
      server.run(Effect.all([sweepOnce, sweepOnce], { concurrency: 2 }))
    const freshnessEvents = async (id: string) =>
      (await wholeFeed(id)).events.filter((e) => e.type === "freshness.changed").map((e) => [e.payload.previous_freshness_state, e.payload.freshness_state, e.payload.effective_at])
    const iso = (ms: number) => new Date(ms).toISOString()

    try {
      expect(await sweepTwiceAtOnce()).toEqual([0, 0])
      server.clock.setTo(start + 80 * DAY_MS + 1000)
      // Reading the document right at the boundary announces the transition first, so its head already
      // holds the freshness.changed event for the state it shows.
      const atBoundary = await trustDocument(ids[0]!)
      expect(atBoundary.freshness.state).toBe("APPROACHING_STALE")
      const announced = (await feedPage(ids[0]!)).body
      expect(atBoundary.integrity.event_head).toEqual(announced.head)
      expect(announced.events[announced.events.length - 1]).toMatchObject({ type: "freshness.changed", payload: { freshness_state: "APPROACHING_STALE" } })
      await sweepTwiceAtOnce()
      for (const id of ids) {
        expect(await freshnessEvents(id)).toEqual([["CURRENT", "APPROACHING_STALE", iso(start + 80 * DAY_MS)]])
        const document = await trustDocument(id)
        expect(document.freshness.state).toBe("APPROACHING_STALE")
        expect(document.integrity.event_head).toEqual((await feedPage(id)).body.head)
      }

      // Two boundaries crossed between sweeps: one event for each, in order.
      server.clock.setTo(start + 250 * DAY_MS)
      await Promise.all([sweepTwiceAtOnce(), sweepTwiceAtOnce()])
      expect(await server.run(sweepOnce)).toBe(0)
      for (const id of ids) {
        expect(await freshnessEvents(id)).toEqual([
          ["CURRENT", "APPROACHING_STALE", iso(start + 80 * DAY_MS)],
          ["APPROACHING_STALE", "STALE", iso(start + 100 * DAY_MS)],
          ["STALE", "EXPIRED", iso(start + 200 * DAY_MS)]
        ])
        const { events, head } = await wholeFeed(id)
        expect(events.map((e) => e.sequence)).toEqual([1, 2, 3, 4])
        expect(verifyEventChain(events, await jwks(), { publicId: id, head })).toMatchObject({ ok: true })
      }

      // A new version restarts the count from its own state: an update recorded while STALE announces only what follows.
      const id = ids[0]!
      const restart = start + 250 * DAY_MS - 90 * DAY_MS
      expect((await putDetermination(server, id, determinationBody(restart))).status).toBe(200)
      const latest = (await feedPage(id, "&after=4")).body.events
      expect(latest.map((e: TrustEvent) => [e.type, e.payload.freshness_state])).toEqual([["determination.updated", "APPROACHING_STALE"]])
      server.clock.setTo(restart + 100 * DAY_MS)
      await sweepTwiceAtOnce()
      expect((await feedPage(id, "&after=5")).body.events.map((e: TrustEvent) => e.payload.freshness_state)).toEqual(["STALE"])
    } finally {
      server.clock.setTo(Date.now())
    }
  })
})

describe.runIf(testDatabaseKind() === "postgres")("several instances on one database", () => {
  it("publish every instance's key, keep one gapless chain, and never announce a boundary twice", async () => {
    // The first instance signs with the test key; this one with a key of its own (a rotation in progress).
    const otherKey = generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString()
    const second = await startTestServer({
      databaseUrl: server.databaseUrl!,
      config: { eventSigningKey: Option.some(Redacted.make(otherKey)) }
    })
    try {
      const id = "DET-V1-EVENTS-TWO-INSTANCES"
      const start = Date.now() - DAY_MS
      expect((await putDetermination(server, id, determinationBody(start))).status).toBe(201)
      await Promise.all(Array.from({ length: 20 }, (_, i) =>
        putDetermination(i % 2 === 0 ? server : second, id, determinationBody(start, { why_this_tier: [`instance write ${i}`] }))))

      for (const instance of [server, second]) instance.clock.setTo(start + 120 * DAY_MS)
      const sweep = (instance: TestServer) => instance.run(sweepOnce)
      await Promise.all([sweep(server), sweep(second), sweep(server), sweep(second)])

      const { events, head } = await wholeFeed(id)
      expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: 23 }, (_, i) => i + 1))
      expect(events.filter((e) => e.type === "freshness.changed").map((e) => e.payload.freshness_state)).toEqual(["APPROACHING_STALE", "STALE"])
      expect(new Set(events.map((e) => e.signature.kid)).size).toBe(2)
      const fromFirst = await jwks()
      const fromSecond = (await request(second, "GET", "/api/v1/events/keys")).body
      expect(fromSecond).toEqual(fromFirst)
      expect(verifyEventChain(events, fromFirst, { publicId: id, head })).toMatchObject({ ok: true, count: 23 })
    } finally {
      for (const instance of [server, second]) instance.clock.setTo(Date.now())
      await second.close()
    }
  })
})
