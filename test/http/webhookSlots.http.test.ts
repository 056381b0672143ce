import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { TrustEvent } from "../../src/domain/TrustEvent.js"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { type Receiver, startReceiver } from "../support/receiver.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { isolatedConfig } from "../support/testConfig.js"

// The delivery worker with far fewer slots (PV_WEBHOOK_CONCURRENCY) than subscriptions due at once: rows
// left behind by a full claim must be claimed as slots free, and a retry must be sent when it falls due
// even when nothing else wakes the worker (webhooks/Deliveries.ts).
let server: TestServer
let receiver: Receiver
let key: { api_key: string }
const asOf = Date.now() - DAY_MS
const Subscriptions = 12

const tiers = ["T1", "T2", "T3", "T4"] as const
let changes = 0
const change = async (publicId: string) => {
  changes += 1
  const reply = await putDetermination(server, publicId, determinationBody(asOf, { tier: tiers[changes % 4]! }))
  expect([200, 201], reply.text).toContain(reply.status)
}

const sequenceOf = (body: string) => (JSON.parse(body).event as TrustEvent).sequence

beforeAll(async () => {
  receiver = await startReceiver()
  server = await startTestServer({
    config: isolatedConfig({
      PV_WEBHOOK_ALLOW_HTTP: "true",
      PV_WEBHOOK_ALLOW_PRIVATE: "true",
      PV_WEBHOOK_TIMEOUT_MS: "1500",
      PV_WEBHOOK_CONCURRENCY: "2"
    })
  })
  key = await createKey(server, ["subscription:write"])
})
afterAll(async () => {
  await server?.close()
  await receiver?.close()
})

describe(`webhook delivery with fewer slots than subscriptions (${testDatabaseKind()})`, () => {
  it("delivers one change to every subscription, two at a time, then each later change in order", async () => {
    const id = "DET-V1-HOOK-SLOTS"
    await change(id)
    const paths = Array.from({ length: Subscriptions }, (_, i) => `/slots/${i}`)
    for (const path of paths) {
      const made = await request(server, "POST", "/api/v1/subscriptions", { bearer: key.api_key, body: { public_id: id, webhook_url: receiver.url(path) } })
      expect(made.status, made.text).toBe(201)
    }
    // Each answer takes a while, so the two slots stay busy and most rows wait behind a full claim.
    let open = 0
    let mostOpen = 0
    receiver.behaviour = (r) => {
      if (!r.path.startsWith("/slots/")) return { kind: "answer", status: 204 }
      open += 1
      mostOpen = Math.max(mostOpen, open)
      setTimeout(() => (open -= 1), 40)
      return { kind: "answer", status: 204, delayMs: 40 }
    }
    const started = Date.now()
    await change(id)
    for (const path of paths) await receiver.waitFor(1, path, 5_000)
    // 12 attempts of ~40 ms through 2 slots: well under the worker's idle wait (a stalled claim loop).
    expect(Date.now() - started).toBeLessThan(4_000)
    expect(mostOpen).toBeLessThanOrEqual(2)

    await change(id)
    await change(id)
    for (const path of paths) {
      const received = await receiver.waitFor(3, path, 5_000)
      const sequences = received.map((r) => sequenceOf(r.body))
      expect(sequences).toEqual([...sequences].sort((a, b) => a - b))
      expect(new Set(sequences).size).toBe(3)
    }
  })

  it("sends a retry when it falls due although nothing else is owed", async () => {
    const id = "DET-V1-HOOK-SLOTS-RETRY"
    await change(id)
    const made = await request(server, "POST", "/api/v1/subscriptions", { bearer: key.api_key, body: { public_id: id, webhook_url: receiver.url("/slots-retry") } })
    expect(made.status, made.text).toBe(201)
    let failures = 0
    receiver.behaviour = (r) => r.path === "/slots-retry" && failures++ < 1 ? { kind: "answer", status: 500 } : { kind: "answer", status: 204 }
    await change(id)
    const [failed, retried] = await receiver.waitFor(2, "/slots-retry", 5_000)
    // The first retry comes after 0.75–1.25 s, not at the worker's idle wait.
    expect(retried!.at - failed!.at).toBeGreaterThanOrEqual(700)
    expect(retried!.at - failed!.at).toBeLessThan(3_000)
    expect(sequenceOf(retried!.body)).toBe(sequenceOf(failed!.body))
  })
})
