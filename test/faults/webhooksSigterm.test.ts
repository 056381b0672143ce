import { afterAll, describe, expect, it } from "vitest"
import { Deployment, sleep } from "../support/childServer.js"
import { type Receiver, startReceiver } from "../support/receiver.js"
import { databaseKinds, determination, putDetermination } from "./service.js"
import { answer, pollUntil } from "./wire.js"
import { chainIds, deliveriesTo, exitMarginMs, orderCheck, subscribe, subscriberKey, webhookEnv } from "./webhookSupport.js"

/**
 * Webhook delivery when the process is stopped with SIGTERM while an attempt is in flight (the rest of the
 * webhook faults: webhooks.test.ts, webhooksOutage.test.ts, and webhooksHandover.test.ts for one of two
 * instances, a file of its own so that the fault project runs it beside these).
 */

const sigtermVariants = databaseKinds.flatMap((kind) => [
  // The attempt (answered after 2 s) ends inside the grace: it is acknowledged before the exit.
  { kind, name: "the attempt ends within the grace", graceMs: 5_000, completes: true },
  // The grace ends first: the attempt is cut off and its lease given back, so the restart sends it at once.
  { kind, name: "the grace ends first", graceMs: 1_000, completes: false }
])

// The four cases run at once (each its own deployment, receiver and subject): most of each is waiting for the
// receiver's 2 s answer and the grace.
describe.concurrent.each(sigtermVariants)("webhooks: SIGTERM with an attempt in flight, $name ($kind)", ({ kind, graceMs, completes }) => {
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
