import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyWebhook } from "../../src/client/index.js"
import type { TrustEvent } from "../../src/domain/TrustEvent.js"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request, until } from "../support/http.js"
import { type Behaviour, type Received, type Receiver, startReceiver } from "../support/receiver.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { isolatedConfig } from "../support/testConfig.js"

// Fair delivery and receivers' signals (docs/API.md §10.5): a subscription's turn is bounded and yields its
// slot; a rotated secret signs the very next attempt; 410 disables; 429/503 Retry-After defers the retry.
const asOf = Date.now() - DAY_MS
const tiers = ["T1", "T2", "T3", "T4"] as const
const changes = new Map<string, number>()
/** One stored change of `publicId` (a tier other than its last), hence exactly one new event. */
const change = async (server: TestServer, publicId: string) => {
  const n = (changes.get(publicId) ?? 0) + 1
  changes.set(publicId, n)
  const reply = await putDetermination(server, publicId, determinationBody(asOf, { tier: tiers[n % 4]! }))
  expect([200, 201], reply.text).toContain(reply.status)
}

const sequenceOf = (r: Received) => (JSON.parse(r.body).event as TrustEvent).sequence

/** A gate a receiver's answer waits behind (Behaviour.until) until the test opens it. */
const gate = () => {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { opened, open }
}

/** A receiver's behaviour: `first()` for the first request, 204 at once for every later one. */
const firstThen204 = (first: () => Behaviour) => {
  let answered = 0
  return (): Behaviour => (answered++ === 0 ? first() : { kind: "answer", status: 204 })
}

/** The lengths of the runs of consecutive arrivals for the same path. */
const runs = (received: ReadonlyArray<Received>): Array<{ path: string; length: number }> => {
  const out: Array<{ path: string; length: number }> = []
  for (const r of received) {
    const last = out.at(-1)
    if (last?.path === r.path) last.length += 1
    else out.push({ path: r.path, length: 1 })
  }
  return out
}

const hookSettings = { PV_WEBHOOK_ALLOW_HTTP: "true", PV_WEBHOOK_ALLOW_PRIVATE: "true" }

describe(`bounded delivery turns (${testDatabaseKind()})`, () => {
  // One slot, so two busy subscriptions must share it; turns of at most 3 events or 600 ms. The attempt
  // time-out is the longest allowed, so a gated first attempt outlasts the changes made meanwhile.
  let server: TestServer
  let key: { api_key: string }
  beforeAll(async () => {
    server = await startTestServer({
      config: isolatedConfig({
        ...hookSettings,
        PV_WEBHOOK_TIMEOUT_MS: "10000",
        PV_WEBHOOK_CONCURRENCY: "1",
        PV_WEBHOOK_TURN_EVENTS: "3",
        PV_WEBHOOK_TURN_MS: "600"
      })
    })
    key = await createKey(server, ["subscription:write"])
  })
  afterAll(() => server?.close())

  /**
   * Two subscriptions, each on its own determination, each owing `backlog` events: the first attempt of
   * `a` is held until both backlogs are written, so from then on both always have something due.
   */
  const twoBacklogs = async (name: string, backlog: number, delayMs: number | undefined) => {
    const receiver = await startReceiver()
    const [x, y] = [`DET-V1-TURN-${name}-X`, `DET-V1-TURN-${name}-Y`]
    await change(server, x)
    await change(server, y)
    for (const [id, path] of [[x, "/a"], [y, "/b"]] as const) {
      const made = await request(server, "POST", "/api/v1/subscriptions", { bearer: key.api_key, body: { public_id: id, webhook_url: receiver.url(path) } })
      expect(made.status, made.text).toBe(201)
    }
    const held = gate()
    let first = true
    receiver.behaviour = (r) => {
      if (r.path === "/a" && first) {
        first = false
        // Held, then as slow as every other answer: each attempt takes at least `delayMs`, the time test's premise.
        return { kind: "answer", status: 204, until: held.opened, ...(delayMs === undefined ? {} : { delayMs }) }
      }
      return { kind: "answer", status: 204, ...(delayMs === undefined ? {} : { delayMs }) }
    }
    await change(server, x)
    await receiver.waitFor(1, "/a")
    for (let i = 1; i < backlog; i++) await change(server, x)
    for (let i = 0; i < backlog; i++) await change(server, y)
    held.open()
    const received = await receiver.waitFor(2 * backlog, undefined, 30_000)
    // The last answers acknowledged before the receiver goes away.
    await until("acknowledged", () => request(server, "GET", "/api/v1/subscriptions?limit=100", { bearer: key.api_key }),
      (reply) => reply.body.subscriptions.every((s: { pending: number }) => s.pending === 0))
    await receiver.close()
    // Each subscription's events arrive once each, in order.
    for (const path of ["/a", "/b"]) {
      const sequences = received.filter((r) => r.path === path).map(sequenceOf)
      expect(sequences).toEqual(Array.from({ length: backlog }, (_, i) => sequences[0]! + i))
    }
    return received
  }

  it("a busy subscription yields its slot after 3 events: the other is served in between", async () => {
    const received = await twoBacklogs("COUNT", 7, undefined)
    const order = runs(received)
    // Unbounded, /a would send all 7 before /b got the slot.
    expect(order.length, JSON.stringify(order)).toBeGreaterThanOrEqual(4)
    for (const run of order) expect(run.length, JSON.stringify(order)).toBeLessThanOrEqual(3)
    expect(order[0]!.path).toBe("/a")
  })

  it("a slow subscription yields its slot once its turn has lasted 600 ms", async () => {
    // 400 ms an answer: a third attempt would start 800 ms into the turn, past its 600 ms.
    const received = await twoBacklogs("TIME", 5, 400)
    const order = runs(received)
    expect(order.length, JSON.stringify(order)).toBeGreaterThanOrEqual(4)
    for (const run of order) expect(run.length, JSON.stringify(order)).toBeLessThanOrEqual(2)
  })
})

describe(`receivers' signals and secrets (${testDatabaseKind()})`, () => {
  // The default turn (100 events, 10 s) and slots: a backlog is sent in one turn.
  let server: TestServer
  let key: { api_key: string }
  beforeAll(async () => {
    server = await startTestServer({ config: isolatedConfig({ ...hookSettings, PV_WEBHOOK_TIMEOUT_MS: "10000" }) })
    key = await createKey(server, ["subscription:write"])
  })
  afterAll(() => server?.close())

  const subscribe = async (publicId: string, url: string) => {
    const made = await request(server, "POST", "/api/v1/subscriptions", { bearer: key.api_key, body: { public_id: publicId, webhook_url: url } })
    expect(made.status, made.text).toBe(201)
    return made.body as { subscription_id: string; webhook_secret: string }
  }
  const status = async (subscriptionId: string) => {
    const reply = await request(server, "GET", `/api/v1/subscriptions/${subscriptionId}`, { bearer: key.api_key })
    expect(reply.status, reply.text).toBe(200)
    return reply.body
  }
  /** The last answer acknowledged (a receiver closed earlier would cut it off), then the receiver closed. */
  const closeWhenAcknowledged = async (receiver: Receiver, subscriptionId: string) => {
    await until("acknowledged", () => status(subscriptionId), (s) => s.pending === 0)
    await receiver.close()
  }

  it("a secret rotated while a backlog is being sent signs the very next attempt (both secrets)", async () => {
    const receiver = await startReceiver()
    const id = "DET-V1-SIGNAL-ROTATE"
    await change(server, id)
    const made = await subscribe(id, receiver.url("/rotate"))
    const held = gate()
    receiver.behaviour = firstThen204(() => ({ kind: "answer", status: 204, until: held.opened }))
    await change(server, id)
    await receiver.waitFor(1, "/rotate")
    for (let i = 0; i < 3; i++) await change(server, id)
    // Rotated while the first attempt of the turn is in flight and three more events are owed.
    const rotated = await request(server, "POST", `/api/v1/subscriptions/${made.subscription_id}/rotate-secret`, { bearer: key.api_key })
    expect(rotated.status, rotated.text).toBe(200)
    held.open()
    const received = await receiver.waitFor(4, "/rotate")
    await closeWhenAcknowledged(receiver, made.subscription_id)
    const check = (r: Received, secret: string) =>
      verifyWebhook(secret, r.headers as Record<string, string>, r.body, { now: Number(r.headers["webhook-timestamp"]) }).ok
    const [inFlight, ...next] = received
    expect(String(inFlight!.headers["webhook-signature"]).split(" ")).toHaveLength(1)
    expect(check(inFlight!, made.webhook_secret)).toBe(true)
    expect(check(inFlight!, rotated.body.webhook_secret)).toBe(false)
    for (const r of next) {
      expect(String(r.headers["webhook-signature"]).split(" ")).toHaveLength(2)
      expect(check(r, rotated.body.webhook_secret)).toBe(true)
      expect(check(r, made.webhook_secret)).toBe(true)
    }
    expect(received.map(sequenceOf)).toEqual([2, 3, 4, 5])
  })

  it("410 Gone disables the subscription at once (disabled_reason gone); resume clears it and delivery restarts", async () => {
    const receiver = await startReceiver()
    const id = "DET-V1-SIGNAL-GONE"
    await change(server, id)
    const made = await subscribe(id, receiver.url("/gone"))
    expect(await status(made.subscription_id)).toMatchObject({ status: "active", disabled_reason: null })
    let gone = true
    receiver.behaviour = () => (gone ? { kind: "answer", status: 410 } : { kind: "answer", status: 204 })
    await change(server, id)
    const disabled = await until("disabled", () => status(made.subscription_id), (s) => s.status === "disabled")
    expect(disabled).toMatchObject({ disabled_reason: "gone", attempts: 1, pending: 1, next_attempt_at: null, last_error: "HTTP 410" })
    await change(server, id)
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(receiver.received).toHaveLength(1)

    gone = false
    const resumed = await request(server, "POST", `/api/v1/subscriptions/${made.subscription_id}/resume`, { bearer: key.api_key })
    expect(resumed.status, resumed.text).toBe(200)
    expect(resumed.body).toMatchObject({ status: "active", disabled_reason: null })
    const received = await receiver.waitFor(3, "/gone")
    expect(received.map(sequenceOf)).toEqual([2, 2, 3])
    expect((await status(made.subscription_id)).disabled_reason).toBeNull()
    await closeWhenAcknowledged(receiver, made.subscription_id)
  })

  it("429 with Retry-After in seconds defers the next attempt to at least then, not the 1 s backoff", async () => {
    const receiver = await startReceiver()
    const id = "DET-V1-SIGNAL-429"
    await change(server, id)
    const made = await subscribe(id, receiver.url("/busy"))
    receiver.behaviour = firstThen204(() => ({ kind: "answer", status: 429, headers: { "retry-after": "3" } }))
    await change(server, id)
    const [refused] = await receiver.waitFor(1, "/busy")
    const failing = await until("failure recorded", () => status(made.subscription_id), (s) => s.attempts === 1)
    expect(Date.parse(failing.next_attempt_at) - refused!.at).toBeGreaterThanOrEqual(2_900)
    const [, retried] = await receiver.waitFor(2, "/busy")
    expect(retried!.at - refused!.at).toBeGreaterThanOrEqual(3_000)
    expect(retried!.at - refused!.at).toBeLessThan(6_000)
    expect(sequenceOf(retried!)).toBe(sequenceOf(refused!))
    await closeWhenAcknowledged(receiver, made.subscription_id)
  })

  it("503 with Retry-After as an HTTP date defers the next attempt to at least that date", async () => {
    const receiver = await startReceiver()
    const id = "DET-V1-SIGNAL-503"
    await change(server, id)
    const made = await subscribe(id, receiver.url("/down"))
    let notBefore = 0
    receiver.behaviour = firstThen204(() => {
      // An HTTP date has whole seconds: at least 3 s from now.
      notBefore = Math.ceil((Date.now() + 3_000) / 1000) * 1000
      return { kind: "answer", status: 503, headers: { "retry-after": new Date(notBefore).toUTCString() } }
    })
    await change(server, id)
    const [refused, retried] = await receiver.waitFor(2, "/down")
    expect(retried!.at).toBeGreaterThanOrEqual(notBefore)
    expect(retried!.at - refused!.at).toBeLessThan(7_000)
    await closeWhenAcknowledged(receiver, made.subscription_id)
  })

  it("a Retry-After beyond an hour defers the next attempt by one hour", async () => {
    const receiver = await startReceiver()
    const id = "DET-V1-SIGNAL-CAP"
    await change(server, id)
    const made = await subscribe(id, receiver.url("/later"))
    receiver.behaviour = () => ({ kind: "answer", status: 503, headers: { "retry-after": "86400" } })
    await change(server, id)
    const [refused] = await receiver.waitFor(1, "/later")
    const failing = await until("failure recorded", () => status(made.subscription_id), (s) => s.attempts === 1)
    const deferred = Date.parse(failing.next_attempt_at) - refused!.at
    expect(deferred).toBeGreaterThanOrEqual(3_600_000 - 1_000)
    expect(deferred).toBeLessThanOrEqual(3_600_000 + 5_000)
    expect((await request(server, "DELETE", `/api/v1/subscriptions/${made.subscription_id}`, { bearer: key.api_key })).status).toBe(204)
    await receiver.close()
  })
})
