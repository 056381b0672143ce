import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyEventChain, verifyWebhook } from "../../src/client/index.js"
import { PublicId } from "../../src/domain/PublicId.js"
import type { TrustEvent } from "../../src/domain/TrustEvent.js"
import { EventsRepo } from "../../src/events/Repo.js"
import { Determinations } from "../../src/trust/Determinations.js"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, expectProblem, putDetermination, request, until } from "../support/http.js"
import { type Received, type Receiver, startReceiver } from "../support/receiver.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { isolatedConfig } from "../support/testConfig.js"
import { determinationChanges } from "../support/webhookHttp.js"

let server: TestServer
let receiver: Receiver
let key: { api_key: string; key_id: string; tenant_id: string }
let reader: { api_key: string }
const asOf = Date.now() - DAY_MS

/** One stored change of `publicId` (a new tier or eligibility), hence exactly one new event. */
const change = determinationChanges(() => server, asOf)

const subscribe = (body: Record<string, unknown>, bearer = key.api_key) =>
  request(server, "POST", "/api/v1/subscriptions", { bearer, body })

const status = async (subscriptionId: string) => {
  const reply = await request(server, "GET", `/api/v1/subscriptions/${subscriptionId}`, { bearer: key.api_key })
  expect(reply.status, reply.text).toBe(200)
  return reply.body
}

const eventsOf = async (publicId: string): Promise<Array<TrustEvent>> =>
  (await request(server, "GET", `/api/v1/events?public_id=${publicId}&limit=100`, { bearer: reader.api_key })).body.events

const deliveredEvents = (received: ReadonlyArray<Received>) => received.map((r) => JSON.parse(r.body).event as TrustEvent)

beforeAll(async () => {
  receiver = await startReceiver()
  server = await startTestServer({
    // Loopback receivers need both development allowances; attempts time out quickly and failures disable soon.
    config: isolatedConfig({
      PV_WEBHOOK_ALLOW_HTTP: "true",
      PV_WEBHOOK_ALLOW_PRIVATE: "true",
      PV_WEBHOOK_TIMEOUT_MS: "1500",
      PV_WEBHOOK_MAX_FAILURE_SECONDS: "2"
    })
  })
  key = await createKey(server, ["subscription:write", "trust:read", "mcp:call"])
  reader = await createKey(server, ["trust:read"])
})
afterAll(async () => {
  await server?.close()
  await receiver?.close()
})

describe(`subscriptions over REST (${testDatabaseKind()})`, () => {
  it("creates pull and webhook subscriptions: 201 with the secret once, 200 with the same subscription after", async () => {
    const id = "DET-V1-HOOK-REST"
    await change(id)
    const pull = await subscribe({ public_id: id })
    expect(pull.status, pull.text).toBe(201)
    expect(pull.body).toMatchObject({ public_id: id, delivery: "pull", status: "active", delivered_through: null, pending: null })
    expect(pull.body).not.toHaveProperty("webhook_secret")
    expect((await subscribe({ public_id: id })).status).toBe(200)

    const url = receiver.url("/rest")
    const hook = await subscribe({ public_id: id, webhook_url: url })
    expect(hook.status, hook.text).toBe(201)
    expect(hook.body).toMatchObject({
      public_id: id,
      delivery: "webhook",
      webhook_url: url,
      status: "active",
      disabled_reason: null,
      after: 1,
      delivered_through: 1,
      pending: 0,
      attempts: 0,
      next_attempt_at: null,
      events_url: `/api/v1/events?public_id=${id}&after=1`
    })
    expect(hook.body.webhook_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(Buffer.from(hook.body.webhook_secret.slice(6), "base64")).toHaveLength(32)
    const again = await subscribe({ public_id: id, webhook_url: url })
    expect(again.status).toBe(200)
    expect(again.body.subscription_id).toBe(hook.body.subscription_id)
    expect(again.body).not.toHaveProperty("webhook_secret")
    expect(await status(hook.body.subscription_id)).not.toHaveProperty("webhook_secret")

    // Listed oldest first, paged by `after`.
    const first = await request(server, "GET", "/api/v1/subscriptions?limit=1", { bearer: key.api_key })
    expect(first.status, first.text).toBe(200)
    expect(first.body.subscriptions).toHaveLength(1)
    expect(first.body.next_after).toBe(first.body.subscriptions[0].subscription_id)
    const all = await request(server, "GET", "/api/v1/subscriptions?limit=100", { bearer: key.api_key })
    const ids = all.body.subscriptions.map((s: { subscription_id: string }) => s.subscription_id)
    expect(ids).toEqual([...ids].sort())
    expect(ids).toEqual(expect.arrayContaining([pull.body.subscription_id, hook.body.subscription_id]))
    const rest = await request(server, "GET", `/api/v1/subscriptions?after=${first.body.next_after}&limit=100`, { bearer: key.api_key })
    expect(rest.body.subscriptions.map((s: { subscription_id: string }) => s.subscription_id)).toEqual(ids.slice(1))
    expect(rest.body.next_after).toBeNull()
    // A cursor that is not a subscription id (NUL, a lone surrogate, anything else) is refused, never sent to SQL.
    for (const bad of ["%00", "sub_nope"]) {
      expectProblem(await request(server, "GET", `/api/v1/subscriptions?after=${bad}`, { bearer: key.api_key }), 422, "validation-failed")
    }
    // Percent-encoding that is not UTF-8 (a lone surrogate) is refused before any route.
    expectProblem(await request(server, "GET", "/api/v1/subscriptions?after=%ED%A0%80", { bearer: key.api_key }), 400, "bad-request")

    // Another tenant sees none of it; a key without the scope is refused; unknown targets are 404.
    const other = await createKey(server, ["subscription:write"], { tenant_id: "tenant-other" })
    expectProblem(await request(server, "GET", `/api/v1/subscriptions/${hook.body.subscription_id}`, { bearer: other.api_key }), 404, "not-found")
    for (const path of ["", "/resume", "/rotate-secret"]) {
      const method = path === "" ? "DELETE" : "POST"
      expectProblem(await request(server, method, `/api/v1/subscriptions/${hook.body.subscription_id}${path}`, { bearer: other.api_key }), 404, "not-found")
    }
    expect((await request(server, "GET", "/api/v1/subscriptions", { bearer: other.api_key })).body.subscriptions).toEqual([])
    expectProblem(await subscribe({ public_id: id }, reader.api_key), 403, "insufficient-scope")
    expectProblem(await subscribe({ public_id: "DET-V1-NOBODY-HOME" }), 404, "determination-not-found")
    expectProblem(await subscribe({ public_id: "nope" }), 400, "invalid-public-id")
    expectProblem(await subscribe({ public_id: id, webhook_url: url, extra: 1 }), 422, "validation-failed")
    expectProblem(await request(server, "GET", "/api/v1/subscriptions/sub_nope", { bearer: key.api_key }), 404, "not-found")
    expectProblem(await request(server, "GET", "/api/v1/subscriptions/%00", { bearer: key.api_key }), 404, "not-found")
    expectProblem(await request(server, "POST", `/api/v1/subscriptions/${pull.body.subscription_id}/rotate-secret`, { bearer: key.api_key }),
      404, "not-found")
    // Input no database could store is refused or normalised before it gets there, never a 5xx.
    for (const bad of ["http://127.0.0.1/\u0000", "http://127.0.0.1/\ud800", "\u0000"]) {
      const reply = await subscribe({ public_id: id, webhook_url: bad })
      expect(reply.status, reply.text).toBeLessThan(500)
    }
  })

  it("delivers every change in order, signed (Standard Webhooks), within a second, with the event exactly as GET /events has it", async () => {
    const id = "DET-V1-HOOK-ORDER"
    await change(id)
    const made = await subscribe({ public_id: id, webhook_url: receiver.url("/order") })
    const secret: string = made.body.webhook_secret
    const started = Date.now()
    await change(id)
    const [firstDelivery] = await receiver.waitFor(1, "/order")
    expect(firstDelivery!.at - started).toBeLessThan(1_000 + 500 /* the PUT itself */)
    for (let i = 0; i < 4; i++) await change(id)
    const received = await receiver.waitFor(5, "/order")
    const stored = await eventsOf(id)
    expect(deliveredEvents(received)).toEqual(stored.slice(1))
    expect(received.map((r) => r.headers["webhook-id"])).toEqual(stored.slice(1).map((e) => e.event_id))
    for (const r of received) {
      expect(r.headers["content-type"]).toBe("application/json")
      expect(Math.abs(Number(r.headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(30)
      const verdict = verifyWebhook(secret, r.headers as Record<string, string>, r.body)
      expect(verdict.ok, JSON.stringify(verdict)).toBe(true)
      expect(JSON.parse(r.body)).toEqual({ type: "pv.trust.event.v1", subscription_id: made.body.subscription_id, event: expect.any(Object) })
      expect(verifyWebhook("whsec_" + Buffer.alloc(32, 1).toString("base64"), r.headers as Record<string, string>, r.body).ok).toBe(false)
    }
    // The pushed events are the chain itself: signed and linked, checkable against the published keys.
    const keys = (await request(server, "GET", "/api/v1/events/keys")).body
    expect(verifyEventChain(stored, keys).ok).toBe(true)
    expect(receiver.maxConcurrentByPath.get("/order")).toBe(1)
    const after = await until("acknowledged", () => status(made.body.subscription_id), (s) => s.pending === 0)
    expect(after).toMatchObject({ delivered_through: stored.at(-1)!.sequence, attempts: 0, last_error: null, next_attempt_at: null })
  })

  it("retries a failing receiver with backoff, one attempt at a time, then goes on in order", async () => {
    const id = "DET-V1-HOOK-RETRY"
    await change(id)
    const made = await subscribe({ public_id: id, webhook_url: receiver.url("/retry") })
    let failures = 0
    receiver.behaviour = (r) => r.path === "/retry" && failures++ < 2 ? { kind: "answer", status: 503, delayMs: 50 } : { kind: "answer", status: 200 }
    await change(id)
    await change(id)
    const failing = await until("a failure recorded", () => status(made.body.subscription_id), (s) => s.attempts >= 1)
    expect(failing.last_error).toMatch(/503/)
    expect(failing.pending).toBe(2)
    expect(Date.parse(failing.next_attempt_at)).toBeGreaterThan(Date.now() - 1000)
    const received = await receiver.waitFor(4, "/retry")
    const times = received.map((r) => r.at)
    // First retry after about a second (jitter 0.75–1.25), the second after about two.
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(700)
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(1_400)
    const stored = await eventsOf(id)
    const sequences = deliveredEvents(received).map((e) => e.sequence)
    expect(sequences).toEqual([stored[1]!.sequence, stored[1]!.sequence, stored[1]!.sequence, stored[2]!.sequence])
    expect(new Set(received.slice(0, 3).map((r) => r.headers["webhook-id"])).size).toBe(1)
    expect(receiver.maxConcurrentByPath.get("/retry")).toBe(1)
    await until("caught up", () => status(made.body.subscription_id), (s) => s.pending === 0 && s.attempts === 0 && s.last_error === null)
    receiver.behaviour = () => ({ kind: "answer", status: 204 })
  })

  it("disables a subscription failing for PV_WEBHOOK_MAX_FAILURE_SECONDS; resume restarts at the first unacknowledged event", async () => {
    const id = "DET-V1-HOOK-DISABLE"
    await change(id)
    const made = await subscribe({ public_id: id, webhook_url: receiver.url("/disable") })
    let broken = true
    receiver.behaviour = (r) => r.path === "/disable" && broken ? { kind: "close" } : { kind: "answer", status: 200 }
    await change(id)
    const disabled = await until("disabled", () => status(made.body.subscription_id), (s) => s.status === "disabled", 20_000)
    expect(disabled).toMatchObject({ pending: 1, next_attempt_at: null, disabled_reason: "failing" })
    expect(disabled.last_error).toBeTruthy()
    const attemptsSeen = receiver.received.filter((r) => r.path === "/disable").length
    await change(id)
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(receiver.received.filter((r) => r.path === "/disable").length).toBe(attemptsSeen)
    // The events stay readable where they always were.
    expect((await request(server, "GET", made.body.events_url, { bearer: reader.api_key })).body.events).toHaveLength(2)

    broken = false
    const resumed = await request(server, "POST", `/api/v1/subscriptions/${made.body.subscription_id}/resume`, { bearer: key.api_key })
    expect(resumed.status, resumed.text).toBe(200)
    expect(resumed.body).toMatchObject({ status: "active", disabled_reason: null, attempts: 0 })
    const received = await receiver.waitFor(attemptsSeen + 2, "/disable")
    const stored = await eventsOf(id)
    expect(deliveredEvents(received.slice(attemptsSeen)).map((e) => e.sequence)).toEqual([stored[1]!.sequence, stored[2]!.sequence])
    await until("caught up", () => status(made.body.subscription_id), (s) => s.pending === 0 && s.status === "active")
    receiver.behaviour = () => ({ kind: "answer", status: 204 })
  })

  it("rotates the secret: for 24 hours both secrets sign every delivery", async () => {
    const id = "DET-V1-HOOK-ROTATE"
    await change(id)
    const made = await subscribe({ public_id: id, webhook_url: receiver.url("/rotate") })
    const rotated = await request(server, "POST", `/api/v1/subscriptions/${made.body.subscription_id}/rotate-secret`, { bearer: key.api_key })
    expect(rotated.status, rotated.text).toBe(200)
    expect(rotated.body.webhook_secret).toMatch(/^whsec_/)
    expect(rotated.body.webhook_secret).not.toBe(made.body.webhook_secret)
    expect(await status(made.body.subscription_id)).not.toHaveProperty("webhook_secret")
    await change(id)
    const [delivery] = await receiver.waitFor(1, "/rotate")
    const signatures = String(delivery!.headers["webhook-signature"]).split(" ")
    expect(signatures).toHaveLength(2)
    for (const signature of signatures) expect(signature).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
    for (const secret of [made.body.webhook_secret, rotated.body.webhook_secret]) {
      expect(verifyWebhook(secret, delivery!.headers as Record<string, string>, delivery!.body).ok).toBe(true)
    }
    // A day later only the new secret signs.
    server.clock.advance(DAY_MS + 60_000)
    try {
      await change(id)
      const [, later] = await receiver.waitFor(2, "/rotate")
      expect(String(later!.headers["webhook-signature"]).split(" ")).toHaveLength(1)
      const now = Number(later!.headers["webhook-timestamp"])
      expect(verifyWebhook(rotated.body.webhook_secret, later!.headers as Record<string, string>, later!.body, { now }).ok).toBe(true)
      expect(verifyWebhook(made.body.webhook_secret, later!.headers as Record<string, string>, later!.body, { now }).ok).toBe(false)
    } finally {
      server.clock.advance(-(DAY_MS + 60_000))
    }
  })

  it("sends nothing after DELETE", async () => {
    const id = "DET-V1-HOOK-DELETE"
    await change(id)
    const made = await subscribe({ public_id: id, webhook_url: receiver.url("/delete") })
    await change(id)
    await receiver.waitFor(1, "/delete")
    const deleted = await request(server, "DELETE", `/api/v1/subscriptions/${made.body.subscription_id}`, { bearer: key.api_key })
    expect(deleted.status, deleted.text).toBe(204)
    expectProblem(await request(server, "GET", `/api/v1/subscriptions/${made.body.subscription_id}`, { bearer: key.api_key }), 404, "not-found")
    expectProblem(await request(server, "DELETE", `/api/v1/subscriptions/${made.body.subscription_id}`, { bearer: key.api_key }), 404, "not-found")
    await change(id)
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(receiver.received.filter((r) => r.path === "/delete")).toHaveLength(1)
  })

  it("a hanging receiver delays no other subscription; its attempt times out and is retried", async () => {
    const id = "DET-V1-HOOK-HANG"
    await change(id)
    const hanging = await subscribe({ public_id: id, webhook_url: receiver.url("/hang") })
    await subscribe({ public_id: id, webhook_url: receiver.url("/healthy") })
    receiver.behaviour = (r) => r.path === "/hang" ? { kind: "hang" } : { kind: "answer", status: 200 }
    const started = Date.now()
    await change(id)
    const [healthy] = await receiver.waitFor(1, "/healthy")
    expect(healthy!.at - started).toBeLessThan(1_500)
    await change(id)
    await receiver.waitFor(2, "/healthy", 3_000)
    const timedOut = await until("timed out", () => status(hanging.body.subscription_id), (s) => s.attempts >= 1, 10_000)
    expect(timedOut.last_error).toMatch(/timed out/)
    receiver.behaviour = () => ({ kind: "answer", status: 204 })
    await until("hanging one catches up", () => status(hanging.body.subscription_id), (s) => s.pending === 0, 15_000)
  })

  it("answers a 3xx with a failed attempt and never follows it", async () => {
    const id = "DET-V1-HOOK-REDIRECT"
    await change(id)
    const made = await subscribe({ public_id: id, webhook_url: receiver.url("/redirect") })
    receiver.behaviour = (r) =>
      r.path === "/redirect" ? { kind: "answer", status: 302, headers: { location: receiver.url("/redirected") } } : { kind: "answer", status: 200 }
    await change(id)
    const failed = await until("failed", () => status(made.body.subscription_id), (s) => s.attempts >= 1)
    expect(failed.last_error).toMatch(/redirect 302 not followed/)
    expect(receiver.received.filter((r) => r.path === "/redirected")).toEqual([])
    await request(server, "DELETE", `/api/v1/subscriptions/${made.body.subscription_id}`, { bearer: key.api_key })
    receiver.behaviour = () => ({ kind: "answer", status: 204 })
  })

  it("delivers the freshness sweeper's events too", async () => {
    const id = "DET-V1-HOOK-SWEEP"
    await change(id)
    await subscribe({ public_id: id, webhook_url: receiver.url("/sweep") })
    const start = Date.now()
    server.clock.setTo(start + 120 * DAY_MS)
    try {
      // The server's own sweeper (every second, on the same clock) may append the event first; either way
      // exactly one freshness.changed must be appended and delivered.
      await server.run(Effect.flatMap(Determinations, (d) => d.sweepOnce))
    } finally {
      server.clock.setTo(Date.now())
    }
    const received = await receiver.waitFor(1, "/sweep")
    expect(deliveredEvents(received)[0]!.type).toBe("freshness.changed")
  })

  it("takes webhook_url through MCP subscribe_trust_changes and answers the same object", async () => {
    const id = "DET-V1-HOOK-MCP"
    await change(id)
    const call = (args: Record<string, unknown>) =>
      request(server, "POST", "/api/v1/mcp", {
        bearer: key.api_key,
        headers: { accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
        body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "subscribe_trust_changes", arguments: args } }
      })
    const made = await call({ public_id: id, webhook_url: receiver.url("/mcp") })
    expect(made.status, made.text).toBe(200)
    const subscription = made.body.result.structuredContent
    expect(subscription).toMatchObject({ delivery: "webhook", webhook_url: receiver.url("/mcp"), status: "active" })
    expect(subscription.webhook_secret).toMatch(/^whsec_/)
    expect(await status(subscription.subscription_id)).toMatchObject({ delivery: "webhook", webhook_url: receiver.url("/mcp") })
    const again = (await call({ public_id: id, webhook_url: receiver.url("/mcp") })).body.result.structuredContent
    expect(again.subscription_id).toBe(subscription.subscription_id)
    expect(again).not.toHaveProperty("webhook_secret")
    // The old pull form still works.
    expect((await call({ public_id: id })).body.result.structuredContent).toMatchObject({ delivery: "pull" })
  })
})

describe(`webhook URL rules with the production defaults (${testDatabaseKind()})`, () => {
  let strict: TestServer
  let strictKey: { api_key: string; key_id: string }
  beforeAll(async () => {
    strict = await startTestServer({ config: isolatedConfig({ PV_WEBHOOK_TIMEOUT_MS: "1500" }) })
    strictKey = await createKey(strict, ["subscription:write"])
    expect((await putDetermination(strict, "DET-V1-HOOK-SSRF", determinationBody(asOf))).status).toBe(201)
  })
  afterAll(() => strict?.close())

  it("refuses at creation every URL that is not https to a public address (422 invalid-webhook-url at /webhook_url)", async () => {
    const refused = [
      "http://example.com/hook",
      "https://user:pass@example.com/hook",
      "https://example.com/" + "a".repeat(2_048),
      "ftp://example.com/hook",
      "/relative",
      "https://127.0.0.1/hook",
      "https://10.1.2.3/hook",
      "https://172.16.0.1/hook",
      "https://192.168.1.1/hook",
      "https://169.254.169.254/latest/meta-data",
      "https://100.64.0.1/hook",
      "https://0.0.0.0/hook",
      "https://[::1]/hook",
      "https://[fc00::1]/hook",
      "https://[fe80::1]/hook",
      "https://[::ffff:127.0.0.1]/hook",
      "https://224.0.0.1/hook",
      "https://localhost/hook"
    ]
    for (const url of refused) {
      const reply = await request(strict, "POST", "/api/v1/subscriptions", {
        bearer: strictKey.api_key,
        body: { public_id: "DET-V1-HOOK-SSRF", webhook_url: url }
      })
      expectProblem(reply, 422, "invalid-webhook-url")
      expect(reply.body.errors, url).toEqual([{ pointer: "/webhook_url", detail: expect.any(String) }])
    }
    expect((await request(strict, "GET", "/api/v1/subscriptions", { bearer: strictKey.api_key })).body.subscriptions).toEqual([])
  })

  it("checks the address actually connected to at every attempt: a name that now resolves to loopback is refused there", async () => {
    // As if `localhost` had resolved to a public address when the subscription was made (DNS rebinding):
    // the row is written directly, past the creation check.
    const publicId = PublicId.make("DET-V1-HOOK-SSRF")
    const subscriptionId = "sub_01JZZZZZZZZZZZZZZZZZZZZZZZ"
    const port = new URL(receiver.url()).port
    for (const [suffix, url] of [["A", `http://localhost:${port}/rebind`], ["B", `http://127.0.0.1:${port}/literal`]] as const) {
      await strict.run(Effect.provide(Effect.flatMap(EventsRepo, (repo) =>
        repo.insertSubscription({
          subscription_id: subscriptionId.slice(0, -1) + suffix,
          tenant_id: "tenant-a",
          key_id: strictKey.key_id,
          public_id: publicId,
          signature_scheme: "v1",
          created_at: new Date(),
          webhook_url: url,
          secret: "whsec_" + Buffer.alloc(32, 7).toString("base64")
        })), EventsRepo.layer))
    }
    expect((await putDetermination(strict, "DET-V1-HOOK-SSRF", determinationBody(asOf, { tier: "T4" }))).status).toBe(200)
    for (const suffix of ["A", "B"]) {
      const reply = await until("refused", () =>
        request(strict, "GET", `/api/v1/subscriptions/${subscriptionId.slice(0, -1) + suffix}`, { bearer: strictKey.api_key }),
        (r) => r.body?.attempts >= 1)
      expect(reply.body.last_error).toMatch(/refused/)
    }
    expect(receiver.received.filter((r) => r.path === "/rebind" || r.path === "/literal")).toEqual([])
  })
})
