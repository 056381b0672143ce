import { afterAll, describe, expect, it } from "vitest"
import { Deployment, sleep } from "../support/childServer.js"
import { type Receiver, startReceiver } from "../support/receiver.js"
import { determination, postgresAvailable, putDetermination } from "./service.js"
import { answer, pollUntil } from "./wire.js"
import { chainIds, deliveriesTo, exitMarginMs, orderCheck, subscribe, subscriberKey, webhookEnv } from "./webhookSupport.js"

/**
 * SIGTERM of one of two instances while its webhook attempt is in flight: the lease it gives back is taken up
 * by the other one at once (the single-instance cases: webhooksSigterm.test.ts).
 */

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
