import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import { Context } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { makeMetricsState } from "../../src/observability/Metrics.js"
import { isAcceptableRequestId, problemInstance, requestIdFrom } from "../../src/observability/RequestRecord.js"

describe("request ids (docs/API.md §13)", () => {
  it("accepts 1 to 128 visible ASCII characters (0x21–0x7E) and nothing else", () => {
    expect(isAcceptableRequestId("a")).toBe(true)
    expect(isAcceptableRequestId("x".repeat(128))).toBe(true)
    expect(isAcceptableRequestId(String.fromCharCode(...Array.from({ length: 94 }, (_, i) => 0x21 + i)))).toBe(true)
    for (const bad of ["", "x".repeat(129), "a b", "a\tb", "a\u007f", "caf\u00e9", "a\u0000"]) expect(isAcceptableRequestId(bad), JSON.stringify(bad)).toBe(false)
  })

  it("keeps an acceptable id and generates a UUID otherwise (also for a repeated header)", () => {
    expect(requestIdFrom("abc")).toBe("abc")
    for (const sent of [undefined, "a b", ["a", "b"]]) expect(requestIdFrom(sent)).toMatch(/^[0-9a-f-]{36}$/)
  })

  it("names the occurrence in a problem's instance, percent-encoding what a URI cannot hold", () => {
    expect(problemInstance("3f2a")).toBe("urn:pv:request:3f2a")
    expect(problemInstance("a b/c")).toBe("urn:pv:request:a%20b%2Fc")
  })
})

describe("transparency-log integration lag", () => {
  const round = (appended: number, extra: Partial<{ locked: boolean; full: boolean }> = {}) =>
    ({ locked: true, size: 10, appended, full: false, ...extra })

  // The lag is measured on performance.now(); the test holds that clock and moves it by hand.
  let now = 1_000
  beforeEach(() => {
    vi.spyOn(performance, "now").mockImplementation(() => now)
  })
  afterEach(() => {
    vi.restoreAllMocks()
  })

  it("grows from the first entry written until a round covers it, and survives a round that did not", () => {
    const { log } = makeMetricsState()
    const logEntryQueued = log.entryQueued
    const logRoundStarted = log.roundStarted
    const logRoundEnded = log.roundEnded
    const logIntegrationLagSeconds = log.lagSeconds
    logRoundEnded(logRoundStarted(), round(0))
    expect(logIntegrationLagSeconds()).toBe(0)
    logEntryQueued()
    now += 20
    // A later write does not restart the wait: the lag counts from the oldest entry not yet covered.
    logEntryQueued()
    expect(logIntegrationLagSeconds()).toBe(0.02)
    now += 30
    expect(logIntegrationLagSeconds()).toBe(0.05)
    // Another instance held the lock, the round failed, or it was full: the entry still waits, from when it was written.
    for (const outcome of [round(0, { locked: false }), undefined, round(10_000, { full: true })]) {
      logRoundEnded(logRoundStarted(), outcome)
      expect(logIntegrationLagSeconds()).toBe(0.05)
    }
    // A write during a covering round waits for the next one, and its lag counts from its own write.
    const waiting = logRoundStarted()
    now += 10
    logEntryQueued()
    now += 5
    logRoundEnded(waiting, round(2))
    expect(log.state().oldestWaiting).toBe(1_060)
    expect(logIntegrationLagSeconds()).toBe(0.005)
    logRoundEnded(logRoundStarted(), round(1))
    expect(logIntegrationLagSeconds()).toBe(0)
    expect(log.state().size).toBe(10)
  })
})

describe("metrics state", () => {
  const gauge = (text: string, series: string) => new RegExp(`^${series.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m").exec(text)?.[1]

  it("is each server's own: the pools, log progress, open streams and delivery figures one observes are not the other's", () => {
    const [a, b] = [makeMetricsState(), makeMetricsState()]
    const pool = (total: number, idle: number) => ({ pool: { totalCount: total, idleCount: idle }, answering: () => true })
    a.observePool(pool(3, 1))
    const unobserve = b.observePool(pool(5, 5))
    b.log.roundEnded(b.log.roundStarted(), { locked: true, size: 42, appended: 0, full: false })
    b.streams.open = 2
    Object.assign(b.delivery, { pending: 7, disabled: 1 })
    const scrape = (state: ReturnType<typeof makeMetricsState>) => (state.observeGauges(), PrometheusMetrics.formatUnsafe(Context.empty()))
    const first = scrape(a)
    expect(gauge(first, `pv_db_pool_connections{state="total"}`)).toBe("3")
    expect(gauge(first, `pv_db_pool_connections{state="idle"}`)).toBe("1")
    const second = scrape(b)
    expect(gauge(second, `pv_db_pool_connections{state="total"}`)).toBe("5")
    expect(gauge(second, "pv_log_size")).toBe("42")
    expect(gauge(second, "pv_event_streams_open")).toBe("2")
    expect(gauge(second, "pv_webhook_pending_deliveries")).toBe("7")
    expect(gauge(scrape(a), "pv_event_streams_open")).toBe("0")
    expect(a.log.state()).toEqual({ size: -1, oldestWaiting: undefined })
    unobserve()
    expect(gauge(scrape(b), `pv_db_pool_connections{state="total"}`)).toBe("0")
  })
})
