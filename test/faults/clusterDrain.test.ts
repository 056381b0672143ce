import { type ChildProcess, spawn } from "node:child_process"
import { availableParallelism } from "node:os"
import { afterAll, describe, expect, it } from "vitest"
import { Deployment } from "../support/childServer.js"
import { expectProblem } from "../support/http.js"
import { determination, postgresAvailable, provisionKey, putDetermination, receiptBody } from "./service.js"
import { answer, call, describeOutcome, type Outcome } from "./wire.js"

/**
 * The drain loses nothing, for a cluster (PV_WORKERS=2, the primary owns the listener) and for a single
 * process (PV_WORKERS=1, the front door's own listener): under receipt load on many new connections,
 * SIGTERM ends every request in one of two ways, never a third. Either it is answered (2xx, or 503 `unavailable`
 * with `Connection: close`), or its connect is refused (ECONNREFUSED: nothing was sent, the client knows
 * it may retry elsewhere). A connection accepted and then reset, with the request already sent, would
 * leave the client unsure whether its receipt was stored. Every acknowledged receipt is there after a
 * restart, and the process exits 0. A busy process leaves connections the system completed unaccepted in
 * its backlog, and closing the listener would reset them: both close it only once accepting has stopped
 * (a single process holds the 503s of the connections accepted meanwhile until then, http/FrontDoor.ts).
 *
 * The cycle runs once as it is, then twice more under CPU contention: as many busy processes as cores,
 * from the load to the exit, as when other processes share the machine. A process that loses the CPU
 * between accepting and closing its listener (tens of milliseconds) must not reset the connections the
 * system completed meanwhile (1 to 5 resets in about one cluster stop in four, before the listeners closed
 * only on a short turn of the event loop: platform/Cluster.ts, `closingTurn`).
 *
 * PV_FAULTS_CLUSTER_DRAIN_RUNS=10 repeats the start-load-SIGTERM cycle (one deployment) to measure, and
 * PV_FAULTS_CLUSTER_DRAIN_CONTENDED_RUNS=10 the cycle under contention (0: none);
 * PV_FAULTS_CLUSTER_DRAIN_WORKERS=1 (or 2) runs one of the two cases only.
 */

const graceMs = 6_000
const clients = 48
const runs = Math.max(1, Number(process.env.PV_FAULTS_CLUSTER_DRAIN_RUNS ?? "1"))
const contendedRuns = Math.max(0, Number(process.env.PV_FAULTS_CLUSTER_DRAIN_CONTENDED_RUNS ?? "2"))
const only = process.env.PV_FAULTS_CLUSTER_DRAIN_WORKERS
const workerCounts = ["2", "1"].filter((count) => only === undefined || only === count)

/** Busy processes, one per core, until stopped. */
const contention = () => {
  const burners: Array<ChildProcess> = Array.from({ length: availableParallelism() }, () =>
    spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }))
  return { stop: () => burners.forEach((burner) => burner.kill("SIGKILL")) }
}

interface Tally {
  acknowledged: number
  unavailable: number
  refused: number
  reset: Array<string>
  other: Array<string>
}

describe.skipIf(!postgresAvailable).each(workerCounts)("SIGTERM drain under receipt load on new connections (postgres, PV_WORKERS=%s)", (workers) => {
  const label = workers === "1" ? "1 process" : `${workers} workers`
  let deployment: Deployment | undefined
  let contended: ReturnType<typeof contention> | undefined
  afterAll(async () => {
    contended?.stop()
    await deployment?.dispose()
  })

  it("every request answered or refused at connect, none reset; acknowledged receipts kept; exit 0", async () => {
    deployment = await Deployment.create("postgres", { env: { PV_SHUTDOWN_GRACE_MS: String(graceMs), PV_WORKERS: workers } })
    const acknowledged = new Map<string, string>()
    const tallies: Array<Tally> = []
    let key = ""
    const subject = "DET-V1-CLUSTER-DRAIN-1"

    for (let run = 0; run < runs + contendedRuns; run++) {
      const { child, baseUrl } = await deployment.start()
      const underContention = run >= runs
      if (key === "") {
        key = await provisionKey(baseUrl)
        expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)
      }
      const bearer = key
      const tally: Tally = { acknowledged: 0, unavailable: 0, refused: 0, reset: [], other: [] }
      let sent = 0
      const settle = (outcome: Outcome): boolean => {
        if (outcome.kind === "answer" && (outcome.answer.status === 201 || outcome.answer.status === 200)) {
          tally.acknowledged++
          acknowledged.set(outcome.answer.body.receipt_id, outcome.answer.body.receipt_digest)
          return true
        }
        if (outcome.kind === "answer" && outcome.answer.status === 503) {
          expectProblem(outcome.answer, 503, "unavailable")
          expect(outcome.answer.headers.get("connection"), "Connection: close on a draining server's 503").toMatch(/close/i)
          tally.unavailable++
          return true
        }
        if (outcome.kind === "refused") tally.refused++
        else if (outcome.kind === "closed") tally.reset.push(describeOutcome(outcome))
        else tally.other.push(describeOutcome(outcome))
        // Refused: the listener is gone, this client stops. Anything else is recorded as a failure.
        return false
      }
      // Each client sends one receipt after another, each on a new connection, until its connect is refused.
      const client = async (c: number) => {
        for (let i = 0; ; i++) {
          sent++
          const outcome = await call(baseUrl, "POST", "/api/v1/reliance-receipts", {
            bearer,
            body: receiptBody(`cluster-drain-${run}-${c}-${i}`, subject),
            timeoutMs: graceMs + 4_000
          })
          if (!settle(outcome)) return
        }
      }
      if (underContention) contended = contention()
      const load = Array.from({ length: clients }, (_, c) => client(c))
      // Load on every worker before the signal.
      const loadStarted = performance.now()
      while (tally.acknowledged < 200 && performance.now() - loadStarted < 15_000) await new Promise((resolve) => setTimeout(resolve, 20))
      expect(tally.acknowledged, "receipts acknowledged before the signal").toBeGreaterThan(0)
      child.signal("SIGTERM")
      await Promise.all(load)
      const exit = await child.waitForExit(graceMs + 15_000)
      contended?.stop()
      contended = undefined
      tallies.push(tally)
      console.log(
        `drain (${label}) run ${run + 1}/${runs + contendedRuns}${underContention ? " (CPU contention)" : ""}: ${sent} sent, ${tally.acknowledged} acknowledged, ${tally.unavailable} 503, ` +
          `${tally.refused} refused at connect, ${tally.reset.length} reset${tally.reset.length ? ` (${tally.reset.join("; ")})` : ""}, ` +
          `${tally.other.length} other${tally.other.length ? ` (${tally.other.join("; ")})` : ""}, exit ${exit.code ?? exit.signal}`
      )
      expect({ code: exit.code, signal: exit.signal }, child.output).toEqual({ code: 0, signal: null })
    }
    const resets = tallies.reduce((sum, t) => sum + t.reset.length, 0)
    const others = tallies.flatMap((t) => t.other)
    console.log(`drain (${label}): ${runs + contendedRuns} runs, ${resets} requests reset in all, runs with a reset: ${tallies.filter((t) => t.reset.length > 0).length}`)
    expect(others, "time-outs or other outcomes").toEqual([])
    expect(tallies.flatMap((t) => t.reset), "requests reset after being sent").toEqual([])

    // Everything acknowledged is there after a restart, unchanged.
    const restarted = await deployment.start({ PV_WORKERS: "1" })
    const ids = [...acknowledged]
    for (let i = 0; i < ids.length; i += 25) {
      await Promise.all(ids.slice(i, i + 25).map(async ([receiptId, digest]) => {
        const read = await answer(restarted.baseUrl, "GET", `/api/v1/reliance-receipts/${receiptId}`, { bearer: key })
        expect(read.status, `acknowledged receipt ${receiptId} after restart: ${read.text}`).toBe(200)
        expect(read.body.receipt_digest).toBe(digest)
      }))
    }
    console.log(`drain (${label}): ${acknowledged.size} acknowledged receipts all present after restart`)
    restarted.child.signal("SIGTERM")
    await restarted.child.waitForExit(graceMs + 5_000).catch(() => undefined)
  })
})
