import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Context } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { combine, type Exposition, formatExposition, labelWorker, mergeWorkers, parseExposition } from "../../src/observability/Exposition.js"
import { makeMetricsState } from "../../src/observability/Metrics.js"

/**
 * The merge of workers' Prometheus texts (PV_WORKERS > 1): counters and histograms add up per series,
 * gauges stay per worker. Texts are generated in the shape Effect's PrometheusMetrics writes them.
 */

const routes = ["/a", "/b/{id}", "weird \"q\" \\ \n"]
const boundaries = [0.1, 1, 2.5]

interface WorkerState {
  readonly requests: ReadonlyArray<{ readonly route: string; readonly status: string; readonly count: number }>
  readonly inFlight: number
  readonly durations: ReadonlyArray<{ readonly route: string; readonly buckets: ReadonlyArray<number>; readonly sum: number }>
}

const escape = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")

/** A worker's text, as Effect's PrometheusMetrics writes one. */
const textOf = (state: WorkerState): string => {
  const lines: Array<string> = []
  if (state.requests.length > 0) {
    lines.push("# HELP pv_http_requests_total Requests.", "# TYPE pv_http_requests_total counter")
    for (const r of state.requests) lines.push(`pv_http_requests_total{route="${escape(r.route)}",status="${r.status}"} ${r.count}`)
  }
  lines.push("# HELP pv_in_flight In flight.", "# TYPE pv_in_flight gauge", `pv_in_flight ${state.inFlight}`)
  if (state.durations.length > 0) {
    lines.push("# HELP pv_duration_seconds Durations.", "# TYPE pv_duration_seconds histogram")
    for (const d of state.durations) {
      let cumulative = 0
      boundaries.forEach((le, i) => {
        cumulative += d.buckets[i]!
        lines.push(`pv_duration_seconds_bucket{route="${escape(d.route)}",le="${le}"} ${cumulative}`)
      })
      const count = cumulative + d.buckets[boundaries.length]!
      lines.push(`pv_duration_seconds_bucket{route="${escape(d.route)}",le="+Inf"} ${count}`)
      lines.push(`pv_duration_seconds_sum{route="${escape(d.route)}"} ${d.sum}`)
      lines.push(`pv_duration_seconds_count{route="${escape(d.route)}"} ${count}`)
    }
  }
  return lines.join("\n") + "\n"
}

const uniqueBy = <A>(key: (a: A) => string) => (items: ReadonlyArray<A>) => {
  const seen = new Set<string>()
  return items.filter((item) => !seen.has(key(item)) && (seen.add(key(item)), true))
}

const workerState: fc.Arbitrary<WorkerState> = fc.record({
  requests: fc.array(fc.record({ route: fc.constantFrom(...routes), status: fc.constantFrom("200", "404", "503"), count: fc.nat(1_000_000) }), { maxLength: 6 })
    .map(uniqueBy((r) => `${r.route} ${r.status}`)),
  inFlight: fc.nat(10_000),
  durations: fc.array(fc.record({ route: fc.constantFrom(...routes), buckets: fc.array(fc.nat(1_000), { minLength: 4, maxLength: 4 }), sum: fc.nat(1_000_000) }), { maxLength: 3 })
    .map(uniqueBy((d) => d.route))
})

const part = (state: WorkerState, worker: number): Exposition => labelWorker(parseExposition(textOf(state)), String(worker))

const valueOf = (exposition: Exposition, name: string, labels: string) =>
  exposition.flatMap((family) => family.samples).find((sample) => sample.name === name && sample.labels === labels)?.value

describe("Prometheus text merge", () => {
  it("a worker's text round-trips through parse and format", () => {
    fc.assert(fc.property(workerState, (state) => {
      const text = textOf(state)
      expect(formatExposition(parseExposition(text))).toBe(text)
    }))
  })

  it("the text Effect's PrometheusMetrics writes for this service's metrics round-trips", () => {
    const { recordRequest } = makeMetricsState()
    recordRequest("/api/v1/things/{id}", "GET", 200, 0.004)
    recordRequest(null, "POST", 503, 0.2)
    const text = PrometheusMetrics.formatUnsafe(Context.empty())
    expect(text).toContain("pv_http_request_duration_seconds_bucket")
    expect(formatExposition(parseExposition(text))).toBe(text)
  })

  it("combining is associative, and the empty exposition is its identity", () => {
    fc.assert(fc.property(workerState, workerState, workerState, (a, b, c) => {
      const [x, y, z] = [part(a, 0), part(b, 1), part(c, 2)]
      expect(formatExposition(combine(combine(x, y), z))).toBe(formatExposition(combine(x, combine(y, z))))
      expect(formatExposition(combine([], x))).toBe(formatExposition(x))
      expect(formatExposition(combine(x, []))).toBe(formatExposition(x))
    }))
  })

  it("counters and histogram series are summed across workers; gauges are kept per worker", () => {
    fc.assert(fc.property(fc.array(workerState, { minLength: 1, maxLength: 4 }), (states) => {
      const merged = mergeWorkers(states.map((state, i) => ({ worker: String(i), text: textOf(state) })))
      // Every series' merged value is the sum of the workers' values for it.
      for (const route of routes) {
        for (const status of ["200", "404", "503"]) {
          const owners = states.flatMap((s) => s.requests.filter((r) => r.route === route && r.status === status))
          const merged_ = valueOf(merged, "pv_http_requests_total", `route="${escape(route)}",status="${status}"`)
          expect(merged_).toBe(owners.length === 0 ? undefined : owners.reduce((sum, r) => sum + r.count, 0))
        }
        const durations = states.flatMap((s) => s.durations.filter((d) => d.route === route))
        const count = durations.reduce((sum, d) => sum + d.buckets.reduce((n, b) => n + b, 0), 0)
        expect(valueOf(merged, "pv_duration_seconds_count", `route="${escape(route)}"`)).toBe(durations.length === 0 ? undefined : count)
        expect(valueOf(merged, "pv_duration_seconds_bucket", `route="${escape(route)}",le="+Inf"`)).toBe(durations.length === 0 ? undefined : count)
      }
      states.forEach((state, i) => expect(valueOf(merged, "pv_in_flight", `worker="${i}"`)).toBe(state.inFlight))
      // One TYPE line per family, and the result parses again to itself.
      const text = formatExposition(merged)
      expect(text.match(/^# TYPE pv_in_flight /gm)).toHaveLength(1)
      expect(formatExposition(parseExposition(text))).toBe(text)
    }))
  })

  it("a single worker's counters come out unchanged; its gauges gain its worker label", () => {
    fc.assert(fc.property(workerState, (state) => {
      const text = textOf(state)
      const merged = formatExposition(mergeWorkers([{ worker: "3", text }]))
      expect(merged).toBe(text.replace(/^pv_in_flight /m, "pv_in_flight{worker=\"3\"} "))
    }))
  })

  it("the same series written with its labels in another order is one series", () => {
    const a = "# TYPE c counter\nc{x=\"1\",y=\"2\"} 3\n"
    const b = "# TYPE c counter\nc{y=\"2\",x=\"1\"} 4\n"
    expect(formatExposition(mergeWorkers([{ worker: "0", text: a }, { worker: "1", text: b }]))).toBe("# TYPE c counter\nc{x=\"1\",y=\"2\"} 7\n")
  })

  it("a malformed line is refused, not guessed at", () => {
    expect(() => parseExposition("c{x=1} 3\n")).toThrow()
    expect(() => parseExposition("c three\n")).toThrow()
  })
})
