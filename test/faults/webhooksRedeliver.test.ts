import { afterAll, describe, expect, it } from "vitest"
import { Deployment, type DeploymentKind } from "../support/childServer.js"
import { type Receiver, startReceiver } from "../support/receiver.js"
import { databaseKinds, determination, putDetermination } from "./service.js"
import { answer, pollUntil } from "./wire.js"
import {
  chainIds, deliveredThrough, deliveriesTo, killLeaseMarginMs, orderCheck, subscribe, subscriberKey, untilDelivered, webhookEnv
} from "./webhookSupport.js"

/**
 * Redelivery under kill -9 (docs/API.md §10.5, contract §14 "Recover"), against the compiled server and a real
 * loopback receiver: a redelivery that was answered 202 survives the crash, and the receiver sees every event
 * from `from_sequence` on, in order; a repeat is only the event possibly in flight at the kill, with its own
 * webhook-id.
 */
// The two databases' cases run at once (each its own deployment and receiver): most of each is waiting for the
// receiver and for the dead process's lease.
describe.concurrent.each(databaseKinds)("webhooks: kill -9 during a redelivery (%s)", (kind: DeploymentKind) => {
  let deployment: Deployment | undefined
  let receiver: Receiver | undefined
  afterAll(async () => {
    await deployment?.dispose()
    await receiver?.close()
  })

  it("after a restart the redelivery goes on from where it was, in order, and nothing after it is lost", async () => {
    receiver = await startReceiver()
    const rx = receiver
    const path = "/redo"
    rx.behaviour = () => ({ kind: "answer", status: 200, delayMs: 150 })
    // The killed process's lease (2 s + killLeaseMarginMs) is what the restarted one waits for.
    deployment = await Deployment.create(kind, { env: webhookEnv(2_000, { PV_WEBHOOK_LEASE_MARGIN_MS: String(killLeaseMarginMs) }) })
    let { child, baseUrl } = await deployment.start()
    const key = await subscriberKey(baseUrl)
    const subject = "DET-V1-HOOK-REDO-0001"
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)
    const made = await subscribe(baseUrl, key, subject, rx.url(path))
    expect(made.after).toBe(1)
    let revision = 0
    for (; revision < 20; revision++) expect((await putDetermination(baseUrl, subject, determination(revision + 1))).status).toBe(200)
    await untilDelivered(rx, [path], 1, 21, 30_000)
    const firstRound = deliveriesTo(rx, path).length

    const from = 3
    const reply = await answer(baseUrl, "POST", `/api/v1/subscriptions/${made.subscription_id}/redeliver`, { bearer: key, body: { from_sequence: from } })
    expect(reply.status, reply.text).toBe(202)
    const redone = () => deliveriesTo(rx, path).slice(firstRound)
    // Part of the way through the redelivery (150 ms an answer): kill.
    await pollUntil("the redelivery under way", 15_000, async () => (redone().length >= 6 ? true : undefined))
    const exit = await child.kill9()
    const killedAt = Date.now()
    expect(exit.signal).toBe("SIGKILL")
    const atKill = redone().length

    // The new process's worker may send before its banner is seen (sooner on a crowded machine): its sends are
    // those after its spawn.
    const spawnedAt = Date.now()
    ;({ child, baseUrl } = await deployment.start())
    // Changes after the restart queue behind the redelivery.
    for (let i = 0; i < 2; i++) expect((await putDetermination(baseUrl, subject, determination(++revision))).status).toBe(200)
    const { ids, head } = await chainIds(baseUrl, key, subject)
    expect(head).toBe(23)
    await pollUntil(`redelivered through ${head}`, 40_000, async () =>
      (redone().reduce((max, d) => Math.max(max, d.sequence), 0) >= head ? true : undefined), 50)

    const deliveries = redone()
    const { problems, repeats } = orderCheck(deliveries, from - 1, head, ids)
    expect(problems, deliveries.map((d) => d.sequence).join(",")).toEqual([])
    // The kill is the only fault: at most the event possibly in flight is sent twice, once before it and once after.
    expect(repeats.length, `repeats ${repeats.map((r) => r.delivery.sequence).join(",")}`).toBeLessThanOrEqual(1)
    for (const { delivery, first } of repeats) {
      expect(first.at).toBeLessThanOrEqual(killedAt)
      expect(delivery.at).toBeGreaterThanOrEqual(spawnedAt)
    }
    expect(rx.maxConcurrentByPath.get(path)).toBe(1)
    expect(deliveredThrough(rx, path, 1)).toBe(head)
    // The attempts the new process made are listed, newest first: the head's, once its answer is recorded.
    const newest = await pollUntil("the head's attempt recorded", 10_000, async () => {
      const attempts = await answer(baseUrl, "GET", `/api/v1/subscriptions/${made.subscription_id}/attempts?limit=5`, { bearer: key })
      expect(attempts.status, attempts.text).toBe(200)
      return attempts.body.attempts[0]?.sequence === head ? attempts.body.attempts[0] : undefined
    })
    expect(newest).toMatchObject({ sequence: head, outcome: "delivered", status: 200 })
    console.log(`webhooks redelivery kill -9 (${kind}): ${atKill} redelivered by the kill, ${deliveries.length} in all for ` +
      `${head - from + 1} events, ${repeats.length} repeat(s)`)
    child.signal("SIGTERM")
    await child.waitForExit(15_000).catch(() => undefined)
  })
})
