import { afterAll, describe, expect, it } from "vitest"
import { childOperatorToken, Deployment, type DeploymentKind, sleep } from "../support/childServer.js"
import { type Receiver, startReceiver } from "../support/receiver.js"
import { databaseKinds, determination, postgresAvailable, putDetermination } from "./service.js"
import { answer, call, describeOutcome, pollUntil } from "./wire.js"
import {
  chainIds, deliveredThrough, deliveriesTo, killLeaseMarginMs, metricValue, orderCheck, subscribe, subscriberKey, untilDelivered,
  webhookEnv
} from "./webhookSupport.js"

/**
 * Webhook delivery under faults, against the compiled server and a real loopback receiver
 * (test/support/receiver.ts): kill -9 with deliveries owed, two instances sharing one outbox, a hanging
 * receiver beside a healthy one; a database outage (webhooksOutage.test.ts) and SIGTERM with an attempt in
 * flight (webhooksSigterm.test.ts) are files of their own, so the fault project runs them side by side. In
 * every case each subscription gets every event at least once and in order (docs/API.md, webhooks): a repeat
 * is only the re-send of the event that was possibly in flight, with the same webhook-id. Shared helpers:
 * webhookSupport.ts.
 */

if (!postgresAvailable) console.warn("PV_FAULTS_POSTGRES=0: the two-instance webhook faults are skipped (they need PostgreSQL)")

// The two databases' cases run at once (each its own deployment and receiver): most of each is waiting for the
// receiver and for the dead process's leases.
describe.concurrent.each(databaseKinds)("webhooks: kill -9 with deliveries owed (%s)", (kind: DeploymentKind) => {
  let deployment: Deployment | undefined
  let receiver: Receiver | undefined
  afterAll(async () => {
    await deployment?.dispose()
    await receiver?.close()
  })

  it("after a restart on the same data every event reaches every subscription, in order; a repeat is only the event in flight at the kill", async () => {
    receiver = await startReceiver()
    const rx = receiver
    rx.behaviour = () => ({ kind: "answer", status: 200, delayMs: 300 })
    // A 2 s attempt time-out (lease 2 s + killLeaseMarginMs): ample for 300 ms answers on a loaded machine, so the
    // kill is the only fault.
    deployment = await Deployment.create(kind, { env: webhookEnv(2_000, { PV_WEBHOOK_LEASE_MARGIN_MS: String(killLeaseMarginMs) }) })
    let { child, baseUrl } = await deployment.start()
    const key = await subscriberKey(baseUrl)
    const subject = "DET-V1-HOOK-KILL-0001"
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)
    const paths = ["/kill-1", "/kill-2", "/kill-3"]
    for (const path of paths) expect((await subscribe(baseUrl, key, subject, rx.url(path))).after).toBe(1)

    // A paced writer, still writing when the process is killed (its last PUT may or may not be stored: the
    // chain read after the restart says). The receiver (300 ms an answer) falls behind, so deliveries are owed.
    let revision = 0
    const writer = (async () => {
      while (revision < 40) {
        const outcome = await call(baseUrl, "PUT", `/api/v1/determinations/${subject}`, { bearer: childOperatorToken, body: determination(++revision), timeoutMs: 10_000 })
        if (outcome.kind !== "answer") return
        expect(outcome.answer.status, describeOutcome(outcome)).toBe(200)
        await sleep(80)
      }
    })()
    await pollUntil("changes written and deliveries under way", 15_000, async () =>
      (revision >= 12 && paths.every((p) => deliveredThrough(rx, p, 1) >= 4) ? true : undefined))
    const exit = await child.kill9()
    const killedAt = Date.now()
    expect(exit.signal).toBe("SIGKILL")
    await writer
    const writtenAtKill = revision
    const beforeKill = paths.map((p) => deliveredThrough(rx, p, 1))

    // The new process's worker may send before its banner is seen (sooner on a crowded machine): its sends are
    // those after its spawn.
    const spawnedAt = Date.now()
    ;({ child, baseUrl } = await deployment.start())
    const restartedAt = Date.now()
    // More changes after the restart: they queue behind what the dead process owed.
    for (let i = 0; i < 3; i++) expect((await putDetermination(baseUrl, subject, determination(++revision))).status).toBe(200)
    const { ids, head } = await chainIds(baseUrl, key, subject)
    await untilDelivered(rx, paths, 1, head, 40_000)

    const report: Array<string> = []
    for (const path of paths) {
      const deliveries = deliveriesTo(rx, path)
      const { problems, repeats } = orderCheck(deliveries, 1, head, ids)
      expect(problems, `${path}: ${deliveries.map((d) => d.sequence).join(",")}`).toEqual([])
      // The kill is the only fault: at most the one event possibly in flight is sent twice, once before and once after.
      expect(repeats.length, `${path}: repeats ${repeats.map((r) => r.delivery.sequence).join(",")}`).toBeLessThanOrEqual(1)
      for (const { delivery, first } of repeats) {
        expect(first.at, `${path}: the first send of a repeated event came before the kill`).toBeLessThanOrEqual(killedAt)
        expect(delivery.at, `${path}: the re-send came after the restart`).toBeGreaterThanOrEqual(spawnedAt)
      }
      const resumed = deliveries.find((d) => d.at >= spawnedAt)!
      // Taken up when the dead process's lease (time-out + margin = 5 s) runs out, or once the new process is up
      // if its start (slow on a crowded machine) took longer, not at some later safety net.
      const takeUpFrom = Math.max(killedAt + 2_000 + killLeaseMarginMs, restartedAt)
      expect(resumed.at - takeUpFrom, `${path}: resumed after the lease ran out and the new process was up`).toBeLessThan(5_000)
      report.push(`${path}: ${deliveries.length} requests for ${head - 1} events, ${repeats.length} repeat(s), resumed ${resumed.at - killedAt} ms after the kill`)
    }
    console.log(`webhooks kill -9 (${kind}): delivered through ${beforeKill.join("/")} of ${writtenAtKill + 1} written by the kill (the last one possibly lost); ${report.join("; ")}`)
    child.signal("SIGTERM")
    await child.waitForExit(15_000).catch(() => undefined)
  })
})

describe.skipIf(!postgresAvailable)("webhooks: two instances on one PostgreSQL", () => {
  let deployment: Deployment | undefined
  let receiver: Receiver | undefined
  afterAll(async () => {
    await deployment?.dispose()
    await receiver?.close()
  })

  it("50 subscriptions, changes through both: never two attempts at once for one subscription, all in order, both instances deliver", async () => {
    receiver = await startReceiver()
    const rx = receiver
    rx.behaviour = () => ({ kind: "answer", status: 204, delayMs: 20 })
    // Few slots per instance, so neither can claim all 50 subscriptions at once: they share the outbox.
    deployment = await Deployment.create("postgres", { env: webhookEnv(3_000, { PV_WEBHOOK_CONCURRENCY: "4" }) })
    const [a, b] = await Promise.all([deployment.start(), deployment.start()])
    const bases = [a!.baseUrl, b!.baseUrl]
    const key = await subscriberKey(bases[0]!)
    const subjects = Array.from({ length: 5 }, (_, i) => `DET-V1-HOOK-PAIR-000${i}`)
    const pathsOf = new Map<string, Array<string>>()
    for (const [i, subject] of subjects.entries()) {
      expect((await putDetermination(bases[i % 2]!, subject, determination(0))).status).toBe(201)
      const paths = Array.from({ length: 10 }, (_, j) => `/pair-${i}-${j}`)
      pathsOf.set(subject, paths)
      // Made through either instance: both serve the same subscriptions table.
      for (const [j, path] of paths.entries()) await subscribe(bases[j % 2]!, key, subject, rx.url(path))
    }

    // One writer per determination, alternating instances, so both wake for changes of every chain.
    const changes = 8
    await Promise.all(subjects.map(async (subject, i) => {
      for (let revision = 1; revision <= changes; revision++) {
        const reply = await putDetermination(bases[(i + revision) % 2]!, subject, determination(revision))
        expect(reply.status, reply.text).toBe(200)
        await sleep(50)
      }
    }))
    const allPaths = [...pathsOf.values()].flat()
    const started = Date.now()
    await untilDelivered(rx, allPaths, 1, changes + 1, 30_000)
    const caughtUpMs = Date.now() - started

    for (const subject of subjects) {
      const { ids, head } = await chainIds(bases[0]!, key, subject)
      expect(head).toBe(changes + 1)
      for (const path of pathsOf.get(subject)!) {
        const deliveries = deliveriesTo(rx, path)
        const { problems, repeats } = orderCheck(deliveries, 1, head, ids)
        expect(problems, `${path}: ${deliveries.map((d) => d.sequence).join(",")}`).toEqual([])
        // No fault here: nothing is sent twice.
        expect(repeats, path).toEqual([])
      }
    }
    const concurrent = allPaths.filter((p) => (rx.maxConcurrentByPath.get(p) ?? 0) !== 1)
    expect(concurrent.map((p) => `${p}: ${rx.maxConcurrentByPath.get(p)}`), "paths with other than 1 request at a time").toEqual([])

    const delivered = await Promise.all(bases.map(async (base) => {
      const metrics = await answer(base, "GET", "/metrics")
      expect(metrics.status).toBe(200)
      return metricValue(metrics.text, "delivered")
    }))
    expect(delivered[0]! + delivered[1]!, "deliveries counted across both instances").toBe(allPaths.length * changes)
    expect(delivered[0], "instance A delivered some").toBeGreaterThan(0)
    expect(delivered[1], "instance B delivered some").toBeGreaterThan(0)
    console.log(`webhooks two instances: ${allPaths.length * changes} deliveries, ${delivered.join(" + ")} by instance; ` +
      `all caught up ${caughtUpMs} ms after the last change`)
    for (const { child } of [a!, b!]) child.signal("SIGTERM")
    await Promise.all([a!, b!].map(({ child }) => child.waitForExit(15_000).catch(() => undefined)))
  })
})

describe("webhooks: hanging paths beside a healthy one on the same receiver (embedded)", () => {
  const deployments: Array<Deployment> = []
  const receivers: Array<Receiver> = []
  afterAll(async () => {
    for (const deployment of deployments) await deployment.dispose()
    for (const receiver of receivers) await receiver.close()
  })
  const started = async (timeoutMs: number, concurrency: number) => {
    const rx = await startReceiver()
    receivers.push(rx)
    const deployment = await Deployment.create("embedded", { env: webhookEnv(timeoutMs, { PV_WEBHOOK_CONCURRENCY: String(concurrency) }) })
    deployments.push(deployment)
    const { child, baseUrl } = await deployment.start()
    return { rx, child, baseUrl, key: await subscriberKey(baseUrl) }
  }

  it("the healthy subscription gets each change within 1 s of its acknowledgement while the hanging ones hold their attempts", async () => {
    // Four slots: the three hanging subscriptions hold three of them, the healthy one has the last.
    const { rx, child, baseUrl, key } = await started(3_000, 4)
    rx.behaviour = (r) => (r.path.startsWith("/hang") ? { kind: "hang" } : { kind: "answer", status: 204 })
    const subject = "DET-V1-HOOK-HANG-0001"
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)
    const hanging = ["/hang-1", "/hang-2", "/hang-3"]
    for (const path of [...hanging, "/healthy"]) await subscribe(baseUrl, key, subject, rx.url(path))

    const latencies: Array<number> = []
    for (let revision = 1; revision <= 8; revision++) {
      const reply = await putDetermination(baseUrl, subject, determination(revision))
      const acknowledgedAt = Date.now()
      expect(reply.status, reply.text).toBe(200)
      const sequence = revision + 1
      const arrived = await pollUntil(`sequence ${sequence} at /healthy`, 5_000, async () =>
        deliveriesTo(rx, "/healthy").find((d) => d.sequence === sequence), 10)
      latencies.push(arrived.at - acknowledgedAt)
      await sleep(300)
    }
    console.log(`webhooks hanging receiver: healthy delivery after the PUT's answer, ms: ${latencies.join(", ")}`)
    expect(latencies.filter((ms) => ms > 1_000), "healthy deliveries later than 1 s after the change was acknowledged").toEqual([])
    const { ids, head } = await chainIds(baseUrl, key, subject)
    expect(orderCheck(deliveriesTo(rx, "/healthy"), 1, head, ids)).toEqual({ problems: [], repeats: [] })

    // Each hanging subscription: one attempt at a time, always the first event it is owed (nothing skipped
    // past an unacknowledged one), retried only after its time-out.
    for (const path of hanging) {
      const attempts = deliveriesTo(rx, path)
      expect(attempts.length, path).toBeGreaterThanOrEqual(1)
      expect(attempts.length, `${path}: attempts in ~3 s of changes with a 3 s time-out and ≥ 0.75 s backoff`).toBeLessThanOrEqual(2)
      expect(new Set(attempts.map((d) => d.sequence)), path).toEqual(new Set([2]))
      expect(rx.maxConcurrentByPath.get(path), path).toBe(1)
      const status = await answer(baseUrl, "GET", `/api/v1/subscriptions?limit=100`, { bearer: key })
      const row = status.body.subscriptions.find((s: { webhook_url: string }) => s.webhook_url === rx.url(path))
      expect(row, path).toMatchObject({ delivered_through: 1, status: "active" })
    }
    expect(child.exited).toBeUndefined()
    child.signal("SIGTERM")
    await child.waitForExit(15_000).catch(() => undefined)
  })

  it("a hanging path's time-out holds back only its own URL while the origin answers: a healthy path waiting for a slot is sent at once, not after a probe", async () => {
    // Three slots: /hang-1, /hang-2 and /healthy, then /hang-3 in the healthy one's once it is done. Claims take the
    // longest due first, and a new subscription is due from when it was made: the order of the subscriptions.
    const { rx, child, baseUrl, key } = await started(3_000, 3)
    // The healthy path answers 200 ms late, so it gets through after the hanging attempts beside it began.
    rx.behaviour = (r) => (r.path.startsWith("/hang") ? { kind: "hang" } : { kind: "answer", status: 204, delayMs: 200 })
    const subject = "DET-V1-HOOK-HANG-0002"
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)
    const paths = ["/hang-1", "/hang-2", "/healthy", "/hang-3"]
    for (const path of paths) await subscribe(baseUrl, key, subject, rx.url(path))
    expect((await putDetermination(baseUrl, subject, determination(1))).status).toBe(200)
    await pollUntil("sequence 2 on every path", 5_000, async () =>
      paths.every((path) => deliveriesTo(rx, path).some((d) => d.sequence === 2)) || undefined, 10)
    const [hangStarted] = [deliveriesTo(rx, "/hang-1")[0]!.at, deliveriesTo(rx, "/hang-2")[0]!.at].sort((a, b) => a - b)
    expect(deliveriesTo(rx, "/healthy")[0]!.at, "the healthy path's attempt began after the first hanging one").toBeGreaterThanOrEqual(hangStarted!)

    // Every slot now hangs: sequence 3 waits at /healthy until the first time-out frees one.
    const reply = await putDetermination(baseUrl, subject, determination(2))
    expect(reply.status, reply.text).toBe(200)
    const arrived = await pollUntil("sequence 3 at /healthy", 10_000, async () =>
      deliveriesTo(rx, "/healthy").find((d) => d.sequence === 3), 10)
    // The time-out counts from the attempt's start, a little before the receiver had its request: an upper bound.
    const afterTimeOutMs = arrived.at - (hangStarted! + 3_000)
    console.log(`webhooks hanging path: the healthy path's next delivery ${afterTimeOutMs} ms after the first time-out`)
    // Held behind a step-1 probe (the origin's failure), it would come 0.75–1.25 s after the time-out.
    expect(afterTimeOutMs, "the healthy path was held back behind a probe").toBeLessThan(700)
    // The hanging paths were not held for it either: each is on its own backoff, the first event still owed.
    for (const path of ["/hang-1", "/hang-2"]) {
      expect(new Set(deliveriesTo(rx, path).map((d) => d.sequence)), path).toEqual(new Set([2]))
      expect(rx.maxConcurrentByPath.get(path), path).toBe(1)
    }
    expect(child.exited).toBeUndefined()
    child.signal("SIGTERM")
    await child.waitForExit(15_000).catch(() => undefined)
  })

  it("a failure at a URL that got another subscription's delivery through meanwhile holds back nobody: that subscription is sent at once, not after a probe", async () => {
    // Two slots: /shared for A (answering 500 after 1.5 s) and for B (204 after 100 ms), then /hang in B's.
    const { rx, child, baseUrl, key } = await started(3_000, 2)
    const subject = "DET-V1-HOOK-HANG-0003"
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)
    // One subscription per key, determination and URL: B needs a key of its own.
    const a = await subscribe(baseUrl, key, subject, rx.url("/shared"))
    const b = await subscribe(baseUrl, await subscriberKey(baseUrl), subject, rx.url("/shared"))
    await subscribe(baseUrl, key, subject, rx.url("/hang"))
    const subscriptionOf = (r: { body: string }) => (JSON.parse(r.body) as { subscription_id: string }).subscription_id
    rx.behaviour = (r) =>
      r.path === "/hang" ? { kind: "hang" }
      : subscriptionOf(r) === a.subscription_id ? { kind: "answer", status: 500, delayMs: 1_500 }
      : { kind: "answer", status: 204, delayMs: 100 }
    const ofB = () => rx.received.filter((r) => r.path === "/shared" && subscriptionOf(r) === b.subscription_id)
    const ofA = () => rx.received.filter((r) => r.path === "/shared" && subscriptionOf(r) === a.subscription_id)

    expect((await putDetermination(baseUrl, subject, determination(1))).status).toBe(200)
    await pollUntil("B's first delivery, then /hang in its slot", 5_000, async () => (ofB().length === 1 && deliveriesTo(rx, "/hang").length === 1) || undefined, 10)
    const failedAt = ofA()[0]!.at + 1_500
    expect(Date.now(), "the second change must be owed before A's attempt fails").toBeLessThan(failedAt - 300)
    // Both slots are taken (A until it fails, /hang for 3 s): B's next event waits for A's slot.
    expect((await putDetermination(baseUrl, subject, determination(2))).status).toBe(200)
    const arrived = await pollUntil("sequence 3 for B", 10_000, async () =>
      ofB().find((r) => (JSON.parse(r.body) as { event: { sequence: number } }).event.sequence === 3), 10)
    const afterFailureMs = arrived.at - failedAt
    console.log(`webhooks shared URL: B's next delivery ${afterFailureMs} ms after A's failure`)
    // Held behind a step-1 probe (the URL's failure), it would come 0.75–1.25 s after the failure.
    expect(afterFailureMs, "B was held back behind a probe").toBeLessThan(600)
    expect(afterFailureMs).toBeGreaterThan(-100)
    expect(child.exited).toBeUndefined()
    child.signal("SIGTERM")
    await child.waitForExit(15_000).catch(() => undefined)
  })
})
