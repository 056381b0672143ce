import { describe, expect, it } from "vitest"
import { logEntryQueued, logIntegrationLagSeconds, logRoundEnded, logRoundStarted, logState } from "../../src/observability/Metrics.js"
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

  it("grows from the first entry written until a round covers it, and survives a round that did not", async () => {
    logRoundEnded(logRoundStarted(), round(0))
    expect(logIntegrationLagSeconds()).toBe(0)
    logEntryQueued()
    await new Promise((r) => setTimeout(r, 20))
    logEntryQueued()
    const lag = logIntegrationLagSeconds()
    expect(lag).toBeGreaterThanOrEqual(0.015)
    // Another instance held the lock, the round failed, or it was full: the entry still waits.
    for (const outcome of [round(0, { locked: false }), undefined, round(10_000, { full: true })]) {
      logRoundEnded(logRoundStarted(), outcome)
      expect(logIntegrationLagSeconds()).toBeGreaterThanOrEqual(lag)
    }
    // A write during a covering round waits for the next one.
    const waiting = logRoundStarted()
    logEntryQueued()
    logRoundEnded(waiting, round(2))
    expect(logState.oldestWaiting).toBeDefined()
    expect(logIntegrationLagSeconds()).toBeLessThan(lag)
    logRoundEnded(logRoundStarted(), round(1))
    expect(logIntegrationLagSeconds()).toBe(0)
    expect(logState.size).toBe(10)
  })
})
