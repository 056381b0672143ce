import { afterAll, describe, expect, it } from "vitest"
import { childOperatorToken, Deployment, type DeploymentKind, sleep } from "../support/childServer.js"
import { type Receiver, startReceiver } from "../support/receiver.js"
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.js"
import {
  allScopes, databaseKinds, determination, eventChain, postgresAvailable, postgresTarget, provisionKey, proxiedDatabase, putDetermination
} from "./service.js"
import { answer, call, describeOutcome, pollUntil } from "./wire.js"

/**
 * Webhook delivery under faults, against the compiled server and a real loopback receiver
 * (test/support/receiver.ts): kill -9 with deliveries owed, two instances sharing one outbox, a hanging
 * receiver beside a healthy one, a database outage, and SIGTERM with an attempt in flight. In every case
 * each subscription gets every event at least once and in order (docs/API.md, webhooks): a repeat is only
 * the re-send of the event that was possibly in flight, with the same webhook-id.
 */

if (!postgresAvailable) console.warn("PV_FAULTS_POSTGRES=0: the two-instance and database-outage webhook faults are skipped (they need PostgreSQL)")

/** Loopback receivers need both development allowances; a short attempt time-out keeps the lease (time-out + 10 s) short. */
const webhookEnv = (timeoutMs = 1_000, extra: Record<string, string> = {}): Record<string, string> => ({
  PV_WEBHOOK_ALLOW_HTTP: "true",
  PV_WEBHOOK_ALLOW_PRIVATE: "true",
  PV_WEBHOOK_TIMEOUT_MS: String(timeoutMs),
  ...extra
})

const subscriberKey = (baseUrl: string) => provisionKey(baseUrl, [...allScopes, "subscription:write"])

const subscribe = async (baseUrl: string, key: string, publicId: string, url: string): Promise<{ subscription_id: string; after: number }> => {
  const reply = await answer(baseUrl, "POST", "/api/v1/subscriptions", { bearer: key, body: { public_id: publicId, webhook_url: url } })
  if (reply.status !== 201) throw new Error(`subscription to ${url}: ${reply.status} ${reply.text}`)
  return reply.body
}

interface Delivery {
  readonly sequence: number
  readonly eventId: string
  readonly webhookId: string
  readonly at: number
}

/** What the receiver got on `path`, in arrival order. */
const deliveriesTo = (receiver: Receiver, path: string): Array<Delivery> =>
  receiver.received.filter((r) => r.path === path).map((r) => {
    const event = JSON.parse(r.body).event
    return { sequence: event.sequence, eventId: event.event_id, webhookId: String(r.headers["webhook-id"]), at: r.at }
  })

/** The highest sequence delivered to `path` so far (`after` when nothing was). */
const deliveredThrough = (receiver: Receiver, path: string, after: number) =>
  deliveriesTo(receiver, path).reduce((max, d) => Math.max(max, d.sequence), after)

/**
 * One subscription's deliveries against its chain (`eventIds[s]` is the stored event_id of sequence s):
 * the first sightings are after+1, after+2, …, through with no gap; anything else is a repeat of the
 * latest event seen (the one possibly in flight), carrying the event's own id as webhook-id like the first.
 */
const orderCheck = (deliveries: ReadonlyArray<Delivery>, after: number, through: number, eventIds: ReadonlyMap<number, string>) => {
  const problems: Array<string> = []
  const repeats: Array<{ delivery: Delivery; first: Delivery }> = []
  const firsts = new Map<number, Delivery>()
  let last = after
  for (const d of deliveries) {
    if (d.webhookId !== eventIds.get(d.sequence) || d.eventId !== eventIds.get(d.sequence)) {
      problems.push(`sequence ${d.sequence}: webhook-id ${d.webhookId}, body event_id ${d.eventId}, stored ${eventIds.get(d.sequence)}`)
    }
    if (d.sequence === last + 1) {
      last = d.sequence
      firsts.set(d.sequence, d)
    } else if (d.sequence === last && last > after) {
      repeats.push({ delivery: d, first: firsts.get(last)! })
    } else {
      problems.push(`sequence ${d.sequence} arrived after ${last}`)
    }
  }
  if (last !== through) problems.push(`first sightings end at ${last}, the chain at ${through}`)
  return { problems, repeats }
}

/** Stored event ids by sequence, and the head. */
const chainIds = async (baseUrl: string, key: string, publicId: string) => {
  const { events, head } = await eventChain(baseUrl, key, publicId)
  return { ids: new Map<number, string>(events.map((e) => [e.sequence, e.event_id])), head: head.sequence }
}

/** Waits until every path has been delivered `through`; the message names the laggards. */
const untilDelivered = async (receiver: Receiver, paths: ReadonlyArray<string>, after: number, through: number, timeoutMs: number) => {
  await pollUntil(`every subscription delivered through ${through}`, timeoutMs, async () => {
    const behind = paths.filter((p) => deliveredThrough(receiver, p, after) < through)
    if (behind.length === 0) return true
    throw new Error(`behind: ${behind.map((p) => `${p} at ${deliveredThrough(receiver, p, after)}`).join(", ")}`)
  }, 50)
}

const metricValue = (text: string, outcome: string): number => {
  const match = new RegExp(`^pv_webhook_deliveries_total\\{[^}]*outcome="${outcome}"[^}]*\\}\\s+([\\d.e+]+)`, "m").exec(text)
  return match ? Number(match[1]) : 0
}

describe.each(databaseKinds)("webhooks: kill -9 with deliveries owed (%s)", (kind: DeploymentKind) => {
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
    // A 2 s attempt time-out (lease 12 s): ample for 300 ms answers on a loaded machine, so the kill is the only fault.
    deployment = await Deployment.create(kind, { env: webhookEnv(2_000) })
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
        expect(delivery.at, `${path}: the re-send came after the restart`).toBeGreaterThanOrEqual(restartedAt)
      }
      const resumed = deliveries.find((d) => d.at >= restartedAt)!
      // Taken up when the dead process's lease (time-out + 10 s = 12 s) runs out, not at some later safety net.
      expect(resumed.at - killedAt, `${path}: resumed after the kill`).toBeLessThan(12_000 + 5_000)
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

describe("webhooks: a hanging receiver beside a healthy one (embedded)", () => {
  let deployment: Deployment | undefined
  let receiver: Receiver | undefined
  afterAll(async () => {
    await deployment?.dispose()
    await receiver?.close()
  })

  it("the healthy subscription gets each change within 1 s of its acknowledgement while the hanging ones hold their attempts", async () => {
    receiver = await startReceiver()
    const rx = receiver
    rx.behaviour = (r) => (r.path.startsWith("/hang") ? { kind: "hang" } : { kind: "answer", status: 204 })
    // Four slots: the three hanging subscriptions hold three of them, the healthy one has the last.
    deployment = await Deployment.create("embedded", { env: webhookEnv(3_000, { PV_WEBHOOK_CONCURRENCY: "4" }) })
    const { child, baseUrl } = await deployment.start()
    const key = await subscriberKey(baseUrl)
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
})

const outageMs = 7_000
/** How long after the outage begins an attempt that was already on its way may still reach the receiver. */
const sentSlackMs = 1_000
const resumeBudgetMs = 5_000

describe.skipIf(!postgresAvailable).each(["refuse", "blackhole"] as const)("webhooks: database outage during delivery (%s)", (fault) => {
  let proxy: TcpProxy | undefined
  let deployment: Deployment | undefined
  let receiver: Receiver | undefined
  let drop: (() => Promise<void>) | undefined
  afterAll(async () => {
    await deployment?.dispose()
    await proxy?.close()
    await drop?.()
    await receiver?.close()
  })

  it("deliveries pause while the database is away and resume by themselves after, all in order; the process never exits", async () => {
    receiver = await startReceiver()
    const rx = receiver
    rx.behaviour = () => ({ kind: "answer", status: 204, delayMs: 150 })
    proxy = await startTcpProxy(postgresTarget())
    const database = await proxiedDatabase(proxy)
    drop = database.drop
    // The default attempt time-out, so the lease (time-out + 10 s = 20 s) is far longer than the resumption
    // allowed below: only leases given back once the database answers again meet it.
    deployment = await Deployment.create("postgres", { databaseUrl: database.url, env: webhookEnv(10_000) })
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

/** Exit is due within the grace; this much more covers process teardown on a loaded machine (as drain.test.ts). */
const exitMarginMs = 2_000

const sigtermVariants = databaseKinds.flatMap((kind) => [
  // The attempt (answered after 2 s) ends inside the grace: it is acknowledged before the exit.
  { kind, name: "the attempt ends within the grace", graceMs: 5_000, completes: true },
  // The grace ends first: the attempt is cut off and its lease given back, so the restart sends it at once.
  { kind, name: "the grace ends first", graceMs: 1_000, completes: false }
])

describe.each(sigtermVariants)("webhooks: SIGTERM with an attempt in flight, $name ($kind)", ({ kind, graceMs, completes }) => {
  let deployment: Deployment | undefined
  let receiver: Receiver | undefined
  afterAll(async () => {
    await deployment?.dispose()
    await receiver?.close()
  })

  it(`exit 0 within PV_SHUTDOWN_GRACE_MS=${graceMs}; after a restart the event is delivered, ${completes ? "and not sent again" : "re-sent within 3 s"}`, async () => {
    receiver = await startReceiver()
    const rx = receiver
    rx.behaviour = () => ({ kind: "answer", status: 200, delayMs: 2_000 })
    // The lease (time-out + 10 s = 13 s) is far longer than the 3 s the re-send is allowed: only a lease given back passes.
    deployment = await Deployment.create(kind, { env: webhookEnv(3_000, { PV_SHUTDOWN_GRACE_MS: String(graceMs) }) })
    let { child, baseUrl } = await deployment.start()
    const key = await subscriberKey(baseUrl)
    const subject = `DET-V1-HOOK-TERM-${graceMs}`
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)
    const made = await subscribe(baseUrl, key, subject, rx.url("/term"))
    expect((await putDetermination(baseUrl, subject, determination(1))).status).toBe(200)
    await rx.waitFor(1, "/term", 5_000)

    const signalledAt = performance.now()
    child.signal("SIGTERM")
    const exit = await child.waitForExit(graceMs + exitMarginMs + 10_000)
    const exitMs = Math.round(exit.at - signalledAt)
    expect({ code: exit.code, signal: exit.signal }, child.output).toEqual({ code: 0, signal: null })
    expect(exitMs, "exit after SIGTERM within PV_SHUTDOWN_GRACE_MS (+ margin)").toBeLessThan(graceMs + exitMarginMs)

    rx.behaviour = () => ({ kind: "answer", status: 200 })
    const spawnedAt = Date.now()
    ;({ child, baseUrl } = await deployment.start())
    const restartedAt = Date.now()
    const status = async () => (await answer(baseUrl, "GET", `/api/v1/subscriptions/${made.subscription_id}`, { bearer: key })).body
    let outcome: string
    if (completes) {
      expect(await status(), "acknowledged before the exit").toMatchObject({ delivered_through: 2, pending: 0 })
      await sleep(1_500)
      expect(deliveriesTo(rx, "/term").map((d) => d.sequence), "an acknowledged event is not sent again").toEqual([2])
      outcome = "acknowledged before the exit, not re-sent"
    } else {
      const [, again] = await rx.waitFor(2, "/term", 3_000)
      // The worker may start a moment before the banner is printed: the re-send can precede it.
      outcome = `re-sent ${again!.at - restartedAt} ms after the restarted process's banner (${again!.at - spawnedAt} ms after its spawn)`
      await pollUntil("acknowledged after the restart", 3_000, async () => ((await status()).pending === 0 ? true : undefined), 100)
    }
    const { ids, head } = await chainIds(baseUrl, key, subject)
    const { problems, repeats } = orderCheck(deliveriesTo(rx, "/term"), 1, head, ids)
    expect(problems).toEqual([])
    expect(repeats.length).toBe(completes ? 0 : 1)
    console.log(`webhooks SIGTERM (${kind}, grace ${graceMs} ms): exit 0 after ${exitMs} ms; ${outcome}`)
    child.signal("SIGTERM")
    await child.waitForExit(15_000).catch(() => undefined)
  })
})

describe.skipIf(!postgresAvailable)("webhooks: SIGTERM of one of two instances with an attempt in flight", () => {
  let deployment: Deployment | undefined
  let receiver: Receiver | undefined
  afterAll(async () => {
    await deployment?.dispose()
    await receiver?.close()
  })

  it("the lease the stopping instance gives back is taken up by the other one at once, not when it would have run out", async () => {
    receiver = await startReceiver()
    const rx = receiver
    let first = true
    rx.behaviour = () => {
      if (!first) return { kind: "answer", status: 200 }
      first = false
      return { kind: "hang" }
    }
    // Lease 20 s; the first attempt hangs (until its 10 s time-out), longer than the second instance's start
    // and the 1 s grace: it is cut off and handed back.
    deployment = await Deployment.create("postgres", { env: webhookEnv(10_000, { PV_SHUTDOWN_GRACE_MS: "1000" }) })
    const a = await deployment.start()
    const key = await subscriberKey(a.baseUrl)
    const subject = "DET-V1-HOOK-HANDOVER-01"
    expect((await putDetermination(a.baseUrl, subject, determination(0))).status).toBe(201)
    const made = await subscribe(a.baseUrl, key, subject, rx.url("/handover"))
    expect((await putDetermination(a.baseUrl, subject, determination(1))).status).toBe(200)
    // The attempt is A's: B starts only once it is in flight, finds the subscription leased, and waits.
    await rx.waitFor(1, "/handover", 5_000)
    const b = await deployment.start()
    await sleep(300)

    a.child.signal("SIGTERM")
    const exit = await a.child.waitForExit(1_000 + exitMarginMs + 10_000)
    expect({ code: exit.code, signal: exit.signal }, a.child.output).toEqual({ code: 0, signal: null })
    const exitedAt = Date.now()
    const [, again] = await rx.waitFor(2, "/handover", 25_000)
    const handoverMs = again!.at - exitedAt
    console.log(`webhooks SIGTERM of one of two instances: the other re-sent the cut-off attempt ${handoverMs} ms after the first exited`)
    expect(handoverMs, "re-sent by the other instance within 3 s of the first one's exit").toBeLessThan(3_000)
    const { ids, head } = await chainIds(b.baseUrl, key, subject)
    const { problems, repeats } = orderCheck(deliveriesTo(rx, "/handover"), 1, head, ids)
    expect(problems).toEqual([])
    expect(repeats.length).toBe(1)
    await pollUntil("acknowledged by the other instance", 3_000, async () =>
      ((await answer(b.baseUrl, "GET", `/api/v1/subscriptions/${made.subscription_id}`, { bearer: key })).body.pending === 0 ? true : undefined), 100)
    b.child.signal("SIGTERM")
    await b.child.waitForExit(15_000).catch(() => undefined)
  })
})
