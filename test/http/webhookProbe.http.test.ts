import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { TrustEvent } from "../../src/domain/TrustEvent.js"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { type Receiver, startReceiver } from "../support/receiver.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { isolatedConfig } from "../support/testConfig.js"

// Probing (webhooks/Deliveries.ts): subscriptions sharing one failing webhook URL (hence one origin) cost one
// attempt per backoff step between them, not one each, and all go on at once when the URL answers again.
// test/http/webhookOrigin.http.test.ts covers one origin across many paths.
let server: TestServer
let receiver: Receiver
const asOf = Date.now() - DAY_MS
const Subscriptions = 20
const Id = "DET-V1-HOOK-PROBE"

const tiers = ["T1", "T2", "T3", "T4"] as const
let changes = 0
const change = async () => {
  changes += 1
  const reply = await putDetermination(server, Id, determinationBody(asOf, { tier: tiers[changes % 4]! }))
  expect([200, 201], reply.text).toContain(reply.status)
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

beforeAll(async () => {
  receiver = await startReceiver()
  server = await startTestServer({
    config: isolatedConfig({ PV_WEBHOOK_ALLOW_HTTP: "true", PV_WEBHOOK_ALLOW_PRIVATE: "true", PV_WEBHOOK_TIMEOUT_MS: "1500" })
  })
})
afterAll(async () => {
  await server?.close()
  await receiver?.close()
})

describe(`one probe per backoff step for a failing webhook URL (${testDatabaseKind()})`, () => {
  it("20 subscriptions to one failing URL: far fewer attempts than 20 per step; all delivered in order right after the probe that gets through", async () => {
    await change()
    // One URL, twenty subscriptions (one per key: a key has one subscription per determination and URL).
    const url = receiver.url("/probe")
    const made: Array<{ id: string; bearer: string }> = []
    for (let i = 0; i < Subscriptions; i++) {
      const key = await createKey(server, ["subscription:write", "trust:read"])
      const reply = await request(server, "POST", "/api/v1/subscriptions", { bearer: key.api_key, body: { public_id: Id, webhook_url: url } })
      expect(reply.status, reply.text).toBe(201)
      made.push({ id: reply.body.subscription_id, bearer: key.api_key })
    }
    let broken = true
    receiver.behaviour = (r) => r.path === "/probe" && broken ? { kind: "answer", status: 500 } : { kind: "answer", status: 204 }
    await change()
    await change()

    await receiver.waitFor(1, "/probe")
    await sleep(7_500)
    const failed = receiver.received.filter((r) => r.path === "/probe")
    // Without probing each of the 20 retries after ~1, ~3 and ~7 s: 60–80 attempts by now. With it, the
    // outage's first claim (all 20 here: PV_WEBHOOK_CONCURRENCY is 32) and after that one probe per
    // backoff step between them all, rotating among them (docs/API.md §10.5).
    const seen = new Set<string>()
    let repeats = 0
    for (const r of failed) {
      const id = (JSON.parse(r.body) as { subscription_id: string }).subscription_id
      if (seen.has(id)) repeats += 1
      seen.add(id)
    }
    expect(repeats, `${failed.length} attempts for ${seen.size} subscriptions`).toBeLessThanOrEqual(6)
    expect(failed.length).toBeLessThanOrEqual(Subscriptions + 6)

    // Each subscription's own record stays truthful: its attempts are the attempts made for it.
    const statuses = await Promise.all(made.map(async (m) =>
      (await request(server, "GET", `/api/v1/subscriptions/${m.id}`, { bearer: m.bearer })).body
    ))
    const recorded = statuses.reduce((sum, s) => sum + s.attempts, 0)
    const sent = receiver.received.filter((r) => r.path === "/probe").length
    expect(recorded).toBeLessThanOrEqual(sent)
    expect(recorded).toBeGreaterThanOrEqual(sent - 1)
    for (const s of statuses) {
      expect(s.pending).toBe(2)
      expect(s.next_attempt_at).not.toBeNull()
      if (s.attempts === 0) expect(s.last_error).toBeNull()
      else expect(s.last_error).toMatch(/500/)
    }

    broken = false
    const sentBefore = receiver.received.length
    const all = await receiver.waitFor(sent + 2 * Subscriptions, "/probe", 25_000)
    const delivered = all.slice(sent)
    const recovered = delivered[0]!.at
    expect(receiver.received.length).toBeGreaterThan(sentBefore)
    // Every subscription's two events, once each, in order, within ~2 s of the probe that got through.
    const bySubscription = new Map<string, Array<number>>()
    for (const r of delivered) {
      const body = JSON.parse(r.body) as { subscription_id: string; event: TrustEvent }
      bySubscription.set(body.subscription_id, [...(bySubscription.get(body.subscription_id) ?? []), body.event.sequence])
    }
    expect(bySubscription.size).toBe(Subscriptions)
    for (const sequences of bySubscription.values()) expect(sequences).toEqual([2, 3])
    console.log(`webhookProbe: all ${delivered.length} deliveries within ${delivered.at(-1)!.at - recovered} ms of the first after the recovery`)
    expect(delivered.at(-1)!.at - recovered).toBeLessThanOrEqual(2_000)
  }, 60_000)
})
