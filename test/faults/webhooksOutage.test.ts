import { afterAll, describe, expect, it } from "vitest"
import { sleep } from "../support/childServer.js"
import { type Receiver, startReceiver } from "../support/receiver.js"
import { determination, postgresAvailable, type ProxiedDeployment, proxiedDeployment, putDetermination } from "./service.js"
import { answer, pollUntil } from "./wire.js"
import { chainIds, deliveredThrough, deliveriesTo, orderCheck, subscribe, subscriberKey, untilDelivered, webhookEnv } from "./webhookSupport.js"

/**
 * Webhook delivery through a database outage (the rest of the webhook faults: webhooks.test.ts and
 * webhooksSigterm.test.ts; one file each so the fault project runs them side by side).
 */

if (!postgresAvailable) console.warn("PV_FAULTS_POSTGRES=0: the database-outage webhook faults are skipped (they need PostgreSQL)")

const outageMs = 7_000
/** How long after the outage begins an attempt that was already on its way may still reach the receiver. */
const sentSlackMs = 1_000
const resumeBudgetMs = 5_000

describe.skipIf(!postgresAvailable).each(["refuse", "blackhole"] as const)("webhooks: database outage during delivery (%s)", (fault) => {
  let setup: ProxiedDeployment | undefined
  let receiver: Receiver | undefined
  afterAll(async () => {
    await setup?.dispose()
    await receiver?.close()
  })

  it("deliveries pause while the database is away and resume by themselves after, all in order; the process never exits", async () => {
    receiver = await startReceiver()
    const rx = receiver
    rx.behaviour = () => ({ kind: "answer", status: 204, delayMs: 150 })
    // The default attempt time-out, so the lease (time-out + 10 s = 20 s) is far longer than the resumption
    // allowed below: only leases given back once the database answers again meet it.
    setup = await proxiedDeployment(webhookEnv(10_000))
    const { proxy, deployment } = setup
    const { child, baseUrl } = await deployment.start()
    const key = await subscriberKey(baseUrl)
    const subject = `DET-V1-HOOK-OUT-${fault.toUpperCase()}`
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)
    const paths = ["/out-1", "/out-2", "/out-3"]
    for (const path of paths) await subscribe(baseUrl, key, subject, rx.url(path))
    const changes = 20
    for (let revision = 1; revision <= changes; revision++) {
      expect((await putDetermination(baseUrl, subject, determination(revision))).status).toBe(200)
    }
    const head = changes + 1

    // The outage starts with deliveries under way (150 ms an answer: 20 events take ~3 s per subscription).
    await pollUntil("deliveries under way", 10_000, async () => (paths.every((p) => deliveredThrough(rx, p, 1) >= 4) ? true : undefined), 10)
    await proxy.setMode(fault)
    const downAt = Date.now()
    const atOutage = paths.map((p) => deliveredThrough(rx, p, 1))
    // Longer than the ~6 s an acknowledgement is retried for: the attempts under way when the database went
    // give up, and their events are sent again afterwards.
    await sleep(outageMs)
    // An attempt already sent when the database went may still arrive (its request is recorded once its body is
    // in); nothing may start later, since each needs the event read from the database first. Were deliveries
    // going on, this would be dozens of requests (150 ms each, three subscriptions).
    const duringOutage = rx.received.filter((r) => r.at > downAt + sentSlackMs)
    expect(duringOutage.map((r) => `${r.path} +${r.at - downAt} ms`), "requests sent while the database was away").toEqual([])
    expect(child.exited, `the process exited during the outage\n${child.output}`).toBeUndefined()

    await proxy.setMode("forward")
    const upAt = Date.now()
    await untilDelivered(rx, paths, 1, head, 30_000)
    const resumedAfter = paths.map((p) => (rx.received.find((r) => r.path === p && r.at >= upAt)?.at ?? Number.NaN) - upAt)
    const caughtUpAfter = Date.now() - upAt
    // As the rest of the service (outage.test.ts): back within 5 s of the database, not when leases run out.
    expect(resumedAfter.filter((ms) => !(ms <= resumeBudgetMs)), `deliveries resumed ${resumedAfter.join("/")} ms after the database came back`).toEqual([])

    const { ids, head: stored } = await chainIds(baseUrl, key, subject)
    expect(stored).toBe(head)
    const repeated: Array<string> = []
    for (const path of paths) {
      const deliveries = deliveriesTo(rx, path)
      const { problems, repeats } = orderCheck(deliveries, 1, head, ids)
      expect(problems, `${path}: ${deliveries.map((d) => d.sequence).join(",")}`).toEqual([])
      // Only the event whose acknowledgement the outage may have lost can come twice: sent before, again after.
      expect(repeats.length, path).toBeLessThanOrEqual(1)
      for (const { delivery, first } of repeats) {
        expect(first.at, `${path}: the first send of a repeated event came before the outage`).toBeLessThanOrEqual(downAt + sentSlackMs)
        expect(delivery.at, `${path}: the re-send came after the database was back`).toBeGreaterThanOrEqual(upAt)
      }
      repeated.push(...repeats.map((r) => `${path} #${r.delivery.sequence}`))
    }
    expect(child.exited, `the process exited\n${child.output}`).toBeUndefined()
    expect((await answer(baseUrl, "GET", "/healthz")).status).toBe(200)
    console.log(`webhooks outage (${fault}): delivered through ${atOutage.join("/")} of ${head} when the database went; ` +
      `first delivery ${resumedAfter.join("/")} ms after it came back, all caught up after ${caughtUpAfter} ms; repeats: ${repeated.join(", ") || "none"}`)
    child.signal("SIGTERM")
    await child.waitForExit(15_000).catch(() => undefined)
  })
})
