import { afterAll, describe, expect, it } from "vitest"
import { parseExposition } from "../../src/observability/Exposition.js"
import { Deployment } from "../support/childServer.js"
import { openSse, type SseClient } from "../support/sse.js"
import { determination, postgresAvailable, provisionKey, putDetermination } from "./service.js"
import { answer, call, describeOutcome } from "./wire.js"

/**
 * With PV_WORKERS=2, one scrape of /metrics reports every worker, whichever worker answers it: counters
 * summed over the workers, gauges per worker (label `worker`), and how many workers reported.
 */

const samples = (text: string, name: string) =>
  parseExposition(text).flatMap((family) => family.samples).filter((sample) => sample.name === name)

const scrape = async (baseUrl: string) => {
  const reply = await answer(baseUrl, "GET", "/metrics")
  expect(reply.status, reply.text).toBe(200)
  expect(reply.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/)
  return reply.text
}

const healthzRequests = (text: string) =>
  samples(text, "pv_http_requests_total").filter((s) => s.labels.includes("route=\"/healthz\"")).reduce((sum, s) => sum + s.value, 0)

describe.skipIf(!postgresAvailable)("metrics of a cluster (postgres, PV_WORKERS=2)", () => {
  let deployment: Deployment | undefined
  const streams: Array<SseClient> = []
  afterAll(async () => {
    for (const stream of streams) stream.close()
    await deployment?.dispose()
  })

  it("one scrape sums every worker's counters and reports each worker's gauges", async () => {
    deployment = await Deployment.create("postgres", { env: { PV_WORKERS: "2" } })
    const { child, baseUrl } = await deployment.start()
    const key = await provisionKey(baseUrl)
    const subject = "DET-V1-CLUSTER-METRICS-1"
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)

    // The banner is worker 0's: worker 1 may still be starting, and until it is ready the primary hands every
    // connection to worker 0. Both are ready once a scrape gathers from both.
    let reporting = samples(await scrape(baseUrl), "pv_cluster_workers_reporting")[0]?.value
    for (let i = 0; i < 200 && reporting !== 2; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      reporting = samples(await scrape(baseUrl), "pv_cluster_workers_reporting")[0]?.value
    }
    expect(reporting, "both workers report within 20 s").toBe(2)

    // Event streams, each on its own connection, until both workers hold one: the per-worker gauge
    // pv_event_streams_open shows it for worker 0 and worker 1.
    const openStreams = (text: string) =>
      new Map(samples(text, "pv_event_streams_open").map((s) => [/worker="(\d+)"/.exec(s.labels)?.[1], s.value]))
    let perWorker = openStreams(await scrape(baseUrl))
    for (let i = 0; i < 4 && !((perWorker.get("0") ?? 0) >= 1 && (perWorker.get("1") ?? 0) >= 1); i++) {
      // Two at a time: connections go to the workers in turn, and the scrape takes one turn too.
      for (let j = 0; j < 2; j++) {
        const stream = await openSse(`${baseUrl}/api/v1/events/stream?public_id=${subject}`, { authorization: `Bearer ${key}` })
        expect(stream.status, stream.text).toBe(200)
        streams.push(stream)
      }
      perWorker = openStreams(await scrape(baseUrl))
    }
    expect(Object.fromEntries(perWorker), "an event stream open on each worker").toEqual({ "0": expect.any(Number), "1": expect.any(Number) })
    expect(perWorker.get("0")! + perWorker.get("1")!).toBe(streams.length)
    expect(Math.min(perWorker.get("0")!, perWorker.get("1")!)).toBeGreaterThanOrEqual(1)

    // Requests spread over both workers (each on a new connection); every scrape, whichever worker
    // answers it, counts all of them.
    const requests = 40
    for (let i = 0; i < requests; i++) {
      const outcome = await call(baseUrl, "GET", "/healthz")
      expect(outcome.kind === "answer" && outcome.answer.status, describeOutcome(outcome)).toBe(200)
    }
    for (let i = 0; i < 4; i++) {
      const text = await scrape(baseUrl)
      expect(healthzRequests(text), `pv_http_requests_total of /healthz in scrape ${i + 1}`).toBe(requests)
      expect(samples(text, "pv_cluster_workers_reporting")[0]?.value).toBe(2)
      expect(samples(text, "pv_cluster_workers")[0]?.value).toBe(2)
      // Gauges per worker: one series each, labelled; counters are not.
      expect(samples(text, "pv_http_concurrency_limit").map((s) => s.labels).sort()).toEqual(["worker=\"0\"", "worker=\"1\""])
      expect(samples(text, "pv_http_requests_total").every((s) => !s.labels.includes("worker="))).toBe(true)
      // One TYPE line per family.
      const types = text.split("\n").filter((line) => line.startsWith("# TYPE "))
      expect(new Set(types).size).toBe(types.length)
    }
    console.log(`cluster metrics: event streams per worker ${JSON.stringify(Object.fromEntries(perWorker))}, ${requests} /healthz counted in every scrape`)

    for (const stream of streams.splice(0)) stream.close()
    child.signal("SIGTERM")
    const exit = await child.waitForExit(20_000)
    expect({ code: exit.code, signal: exit.signal }, child.output).toEqual({ code: 0, signal: null })
  })
})
