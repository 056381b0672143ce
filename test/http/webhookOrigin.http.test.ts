import { createServer } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { TrustEvent } from "../../src/domain/TrustEvent.js"
import { MinRetryDelayMs } from "../../src/webhooks/Backoff.js"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { type Received, type Receiver, startReceiver } from "../support/receiver.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { isolatedConfig } from "../support/testConfig.js"

// Per-origin probing (webhooks/Deliveries.ts, docs/API.md §10.5): a receiver is an origin (scheme, host,
// port). Its failures (5xx, 429, no connection, time-out) hold back every subscription owing it behind
// one rotating probe; other failures (404 …) only the same exact URL. Real loopback receivers, both databases.
let server: TestServer
let key: { api_key: string }
const receivers: Array<Receiver> = []
const asOf = Date.now() - DAY_MS
const Concurrency = 32
/** PV_WEBHOOK_TIMEOUT_MS (its default): with a margin of 1 s, how long a held subscription waits for its probe's outcome. */
const TimeoutMs = 10_000

const tiers = ["T1", "T2", "T3", "T4"] as const
let changes = 0
/** One stored change of `publicId`, hence one new event; when it was answered. */
const change = async (publicId: string): Promise<number> => {
  changes += 1
  const reply = await putDetermination(server, publicId, determinationBody(asOf, { tier: tiers[changes % 4]!, eligible: changes % 2 === 0 }))
  expect([200, 201], reply.text).toContain(reply.status)
  return Date.now()
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const receiver = async () => {
  const made = await startReceiver()
  receivers.push(made)
  return made
}

/** Subscribe `urls` (a few at a time) to `publicId`: their subscription ids, in order. */
const subscribeAll = async (publicId: string, urls: ReadonlyArray<string>): Promise<Array<string>> => {
  const ids: Array<string> = []
  for (let i = 0; i < urls.length; i += 8) {
    const replies = await Promise.all(urls.slice(i, i + 8).map((webhook_url) =>
      request(server, "POST", "/api/v1/subscriptions", { bearer: key.api_key, body: { public_id: publicId, webhook_url } })
    ))
    for (const reply of replies) {
      expect(reply.status, reply.text).toBe(201)
      ids.push(reply.body.subscription_id)
    }
  }
  return ids
}

/** Every subscription of the key, by id. */
const subscriptions = async (): Promise<Map<string, { attempts: number; last_error: string | null; pending: number; webhook_url: string }>> => {
  const all = new Map()
  let after = ""
  for (;;) {
    const reply = await request(server, "GET", `/api/v1/subscriptions?limit=100${after === "" ? "" : `&after=${after}`}`, { bearer: key.api_key })
    expect(reply.status, reply.text).toBe(200)
    for (const s of reply.body.subscriptions) all.set(s.subscription_id, s)
    if (reply.body.next_after === null) return all
    after = reply.body.next_after
  }
}

const bodyOf = (r: Received) => JSON.parse(r.body) as { subscription_id: string; event: TrustEvent }

/** A loopback port nothing listens on: connections to it are refused. */
const closedPort = async (): Promise<number> => {
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve))
  const port = (probe.address() as { port: number }).port
  await new Promise((resolve) => probe.close(resolve))
  return port
}

beforeAll(async () => {
  server = await startTestServer({
    config: isolatedConfig({
      PV_WEBHOOK_ALLOW_HTTP: "true",
      PV_WEBHOOK_ALLOW_PRIVATE: "true",
      // Every receiver here answers at once or refuses: the time-out only has to outlast a loaded machine's stall,
      // so that what each record says is the receiver's answer (at 1.5 s, load 20 recorded "timed out" for a 500).
      // At its default (10 s) it also makes a hold (the time-out + 1 s) long beside what the first test's work
      // costs a busy machine, which that test's bound on the healthy origin relies on.
      PV_WEBHOOK_TIMEOUT_MS: String(TimeoutMs),
      PV_WEBHOOK_CONCURRENCY: String(Concurrency)
    })
  })
  key = await createKey(server, ["subscription:write", "trust:read"])
})
afterAll(async () => {
  await server?.close()
  for (const r of receivers) await r.close()
})

describe(`one probe per backoff step for a failing receiver, across its paths (${testDatabaseKind()})`, () => {
  it("100 subscriptions on distinct paths of an origin answering 500, 40 on a refused one: few attempts each; another origin is unaffected; all delivered in order right after recovery", async () => {
    const Id = "DET-V1-HOOK-ORIGIN"
    await change(Id)
    const failing = await receiver()
    const healthy = await receiver()
    const refusedPort = await closedPort()
    // More than the bound below (PV_WEBHOOK_CONCURRENCY and a few probes) on each failing origin, so that without
    // probing their first attempts alone would exceed it (three times over on the origin answering 500): most are
    // held back after the first claim. Each costs its share of every failure statement (and two deliveries at the
    // end), so no more than that.
    const failingIds = await subscribeAll(Id, Array.from({ length: 100 }, (_, i) => failing.url(`/t/${i}`)))
    const refusedIds = await subscribeAll(Id, Array.from({ length: 40 }, (_, i) => `http://127.0.0.1:${refusedPort}/t/${i}`))
    const healthyIds = await subscribeAll(Id, Array.from({ length: 20 }, (_, i) => healthy.url(`/h/${i}`)))
    let broken = true
    failing.behaviour = () => (broken ? { kind: "answer", status: 500 } : { kind: "answer", status: 204 })

    await change(Id)
    await change(Id)
    // The other origin gets both events on all its paths, never held back: it waits only for the slots the failing
    // origins' first claims hold (their subscriptions were made first, so they are claimed first), which costs
    // seconds of a busy machine's CPU. Held back at the failing origin, it would wait at least until that origin's
    // first hold ends: from its first failure, the probe's delay (≥ 0.75 s) and then the probe's outcome (the 10 s
    // time-out and a margin of 1 s), all timers a busy machine does not shorten; or until it recovers (never, here).
    const healthyGot = await healthy.waitFor(2 * healthyIds.length, undefined, 15_000)
    const firstFailure = failing.received[0]!.at
    expect(healthyGot.at(-1)!.at - firstFailure).toBeLessThan(750 + TimeoutMs + 1_000)
    // One backoff step (a probe ~1 s after the first failure): the next probe, the one the recovery below waits
    // for, is due ~2 s after it (2.25–3.75 s in all).
    await sleep(Math.max(0, firstFailure + 2_000 - Date.now()))

    // Without probing, every one of the 100 subscriptions is attempted, and the first claim's again after ~1 s:
    // 130 attempts by now. With it, the outage's first claim (at most PV_WEBHOOK_CONCURRENCY attempts at once)
    // and then one probe per step.
    const attemptsAtFailing = failing.received.length
    expect(attemptsAtFailing).toBeLessThanOrEqual(Concurrency + 6)
    const records = await subscriptions()
    // The next probe may be made while the records are read (it is due 2.25–3.75 s after the first failure, and a
    // busy machine can take longer to get here): the records lie between what the receiver had before and after.
    const attemptsAfterRead = failing.received.length
    const sum = (ids: ReadonlyArray<string>) => ids.reduce((total, id) => total + records.get(id)!.attempts, 0)
    // Each subscription's own record is truthful: the attempts made for it, its own error; none for the held.
    expect(sum(failingIds)).toBeLessThanOrEqual(attemptsAfterRead)
    expect(sum(failingIds)).toBeGreaterThanOrEqual(attemptsAtFailing - 1)
    // Refused connections are the origin's failure too: the same bound (40 attempts at once without probing).
    expect(sum(refusedIds)).toBeLessThanOrEqual(Concurrency + 6)
    for (const id of [...failingIds, ...refusedIds]) {
      const record = records.get(id)!
      expect(record.pending).toBe(2)
      if (record.attempts === 0) expect(record.last_error).toBeNull()
      else expect(record.last_error).toMatch(refusedIds.includes(id) ? /ECONNREFUSED/ : /HTTP 500/)
    }
    for (const id of healthyIds) expect(records.get(id)).toMatchObject({ pending: 0, attempts: 0 })

    // The receiver answers again: the next probe gets through and every held subscription goes at once.
    broken = false
    const sent = failing.received.length
    const all = await failing.waitFor(sent + 2 * failingIds.length, undefined, 30_000)
    const delivered = all.slice(sent)
    const recovered = delivered[0]!.at
    const bySubscription = new Map<string, Array<number>>()
    for (const r of delivered) {
      const body = bodyOf(r)
      bySubscription.set(body.subscription_id, [...(bySubscription.get(body.subscription_id) ?? []), body.event.sequence])
    }
    expect(bySubscription.size).toBe(failingIds.length)
    for (const sequences of bySubscription.values()) expect(sequences).toEqual([2, 3])
    // Released by the statement that acknowledges the probe, the others start at once: left to their hold, none
    // would be due before it ended, the probe's outcome and its margin (the time-out + 1 s) after the probe was due.
    const probeId = bodyOf(delivered[0]!).subscription_id
    expect(delivered.find((r) => bodyOf(r).subscription_id !== probeId)!.at - recovered).toBeLessThan(TimeoutMs / 2)
    // 200 deliveries within seconds of the probe that got through (about 2 s on a quieter machine), bounded by sending
    // them through 32 slots (a subscription that failed itself could also wait out the rest of its own
    // backoff, but those ended long before this probe). The bound leaves room for a loaded machine.
    expect(delivered.at(-1)!.at - recovered).toBeLessThanOrEqual(12_000)
    expect(failing.received.length).toBe(sent + 2 * failingIds.length)
  }, 120_000)

  it("one path answering 500 forever beside healthy ones on the same origin: the probe rotates to a healthy path, which releases them; then every healthy delivery within 3 s of its change; the failing path keeps its own backoff", async () => {
    const Id = "DET-V1-HOOK-TENANTS"
    await change(Id)
    const shared = await receiver()
    const healthyPaths = Array.from({ length: 10 }, (_, i) => `/ok/${i}`)
    await subscribeAll(Id, [shared.url("/bad"), ...healthyPaths.map((p) => shared.url(p))])
    let allBroken = true
    let badBroken = true
    // /bad answers after a while, so its failures land while healthy deliveries may be owed.
    shared.behaviour = (r) =>
      r.path === "/bad" && badBroken
        ? { kind: "answer", status: 500, delayMs: 150 }
        : allBroken ? { kind: "answer", status: 500 } : { kind: "answer", status: 204, delayMs: 20 }
    const attemptsTo = (path: string) => shared.received.filter((r) => r.path === path)

    // The whole receiver fails first: one claim's attempts, then one probe per step, rotating.
    const changedAt = new Map<number, number>([[2, await change(Id)]])
    await shared.waitFor(1)
    await sleep(3_000)
    expect(shared.received.length).toBeLessThanOrEqual(11 + 3)
    // Then every path but /bad answers again. The pending probe (due within its step's delay: ≤ 2.5 + 5 s
    // here) is the held path attempted least recently; were it /bad, the next one (≤ 10 s later) cannot
    // be, since /bad has just been attempted. Whichever healthy path gets through releases all of them.
    allBroken = false
    const fixed = Date.now()
    const deadline = fixed + 25_000
    while (healthyPaths.some((p) => attemptsTo(p).at(-1)?.at === undefined || attemptsTo(p).at(-1)!.at < fixed) && Date.now() < deadline) {
      await sleep(50)
    }
    const released = Math.max(...healthyPaths.map((p) => attemptsTo(p).at(-1)!.at))
    expect(released - fixed).toBeLessThanOrEqual(20_000)
    const firstOk = Math.min(...healthyPaths.map((p) => attemptsTo(p).at(-1)!.at))
    // Released together, at the probe's success.
    expect(released - firstOk).toBeLessThanOrEqual(1_000)

    // Steady changes while /bad keeps failing: a dozen, each a chance for /bad to be attempted out of its own
    // backoff (twice the bound below), and few enough that its backoff is still short when it answers again.
    const badBefore = attemptsTo("/bad").length
    let sequence = 2
    for (let i = 0; i < 12; i++) {
      sequence += 1
      changedAt.set(sequence, await change(Id))
      await sleep(400)
    }
    const last = sequence
    const waitUntil = Date.now() + 15_000
    while (healthyPaths.some((p) => attemptsTo(p).filter((r) => r.at >= fixed).length < last - 1) && Date.now() < waitUntil) await sleep(100)
    // The bound: a failure of /bad holds back the healthy paths owing something (and not in flight) until
    // its probe, due after the first step's delay (≤ 1.25 s): the probe is a healthy path (never /bad,
    // just attempted), gets through and releases them. Plus claiming and sending. (When a healthy path got
    // through while /bad's attempt was under way, /bad's failure holds back only /bad.)
    const delays = healthyPaths.map((path) => {
      const got = attemptsTo(path).filter((r) => r.at >= fixed).map((r) => ({ sequence: bodyOf(r).event.sequence, at: r.at }))
      expect(got.map((g) => g.sequence), path).toEqual(Array.from({ length: last - 1 }, (_, i) => i + 2))
      return got.slice(1).map((g) => ({ what: `${path} #${g.sequence}`, ms: g.at - changedAt.get(g.sequence)! }))
    }).flat()
    console.log(`webhookOrigin: healthy deliveries beside /bad, ms after the change: median ${delays.map((d) => d.ms).sort((a, b) => a - b)[delays.length >> 1]}, ` +
      `max ${Math.max(...delays.map((d) => d.ms))}`)
    for (const d of delays) expect(d.ms, d.what).toBeLessThanOrEqual(3_000)
    // /bad kept its own backoff (≥ 1.5 s apart by now, doubling), not one attempt per change or per release.
    const badAttempts = attemptsTo("/bad").slice(badBefore).map((r) => r.at)
    expect(badAttempts.length).toBeLessThanOrEqual(6)
    for (let i = 1; i < badAttempts.length; i++) expect(badAttempts[i]! - badAttempts[i - 1]!).toBeGreaterThanOrEqual(1_400)

    // When /bad answers again it catches up, in order.
    badBroken = false
    const sent = attemptsTo("/bad").length
    const first = bodyOf(attemptsTo("/bad").at(-1)!).event.sequence
    const bad = await shared.waitFor(sent + last - first + 1, "/bad", 30_000)
    // From the event it was retrying, each once and in order.
    expect(bad.slice(sent).map((r) => bodyOf(r).event.sequence)).toEqual(Array.from({ length: last - first + 1 }, (_, i) => first + i))
  }, 90_000)

  it("a 404 on one path holds back nobody else on the origin", async () => {
    const Id = "DET-V1-HOOK-NOTFOUND"
    await change(Id)
    const shared = await receiver()
    // A control origin with the same paths and no failing one, subscribed to the same events: its deliveries are
    // claimed with the shared origin's and meet the same load, so they say when a delivery not held back arrives.
    const control = await receiver()
    const others = Array.from({ length: 10 }, (_, i) => `/fine/${i}`)
    await subscribeAll(Id, [shared.url("/gone"), ...others.map((p) => shared.url(p)), ...others.map((p) => control.url(p))])
    shared.behaviour = (r) => (r.path === "/gone" ? { kind: "answer", status: 404 } : { kind: "answer", status: 204, delayMs: 20 })
    control.behaviour = () => ({ kind: "answer", status: 204, delayMs: 20 })
    for (let sequence = 2; sequence <= 9; sequence++) {
      await change(Id)
      await sleep(300)
    }
    await shared.waitFor(8 * others.length + 1, undefined, 10_000)
    const controlGot = await control.waitFor(8 * others.length, undefined, 10_000)
    await sleep(500)
    /** When the control origin's last delivery of each event arrived. */
    const controlAt = new Map<number, number>()
    for (const r of controlGot) controlAt.set(bodyOf(r).event.sequence, Math.max(controlAt.get(bodyOf(r).event.sequence) ?? 0, r.at))
    for (const path of others) {
      const got = shared.received.filter((r) => r.path === path).map((r) => ({ sequence: bodyOf(r).event.sequence, at: r.at }))
      expect(got.map((g) => g.sequence), path).toEqual([2, 3, 4, 5, 6, 7, 8, 9])
      // Never held back: each arrives with the control origin's copy of the same event. Held behind the origin's
      // probe, it would wait at least the shortest retry delay (MinRetryDelayMs, 750 ms) more. (An absolute bound,
      // "within a second of its change", failed at 1,013 ms in a whole run on two loaded cores.)
      for (const g of got) expect(g.at - controlAt.get(g.sequence)!, `${path} #${g.sequence}`).toBeLessThan(MinRetryDelayMs - 250)
    }
    const records = [...(await subscriptions()).values()].filter((s) => s.webhook_url.startsWith(shared.url("/")))
    const gone = records.find((s) => s.webhook_url === shared.url("/gone"))!
    expect(gone.last_error).toMatch(/HTTP 404/)
    // Its own attempts, truthfully (one may be in flight: received, not yet recorded).
    const goneSent = shared.received.filter((r) => r.path === "/gone").length
    expect(gone.attempts).toBeLessThanOrEqual(goneSent)
    expect(gone.attempts).toBeGreaterThanOrEqual(goneSent - 1)
    for (const s of records.filter((s) => s !== gone)) expect(s).toMatchObject({ pending: 0, attempts: 0, last_error: null })
  }, 60_000)
})
