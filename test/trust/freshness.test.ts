import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import {
  type FreshnessState,
  FreshnessStates,
  freshnessAt,
  type LifecycleState,
  LifecycleStates,
  nextFreshnessBoundary
} from "../../src/domain/Freshness.js"

const DAY = 86_400_000
const rank = (state: FreshnessState) => FreshnessStates.indexOf(state)

/**
 * docs/API.md §6.2 in exact rational arithmetic (everything times 5, in BigInt): with w = valid_until - as_of,
 * CURRENT while now < valid_until - w/5, APPROACHING_STALE while now < valid_until, STALE while
 * now < valid_until + w, then EXPIRED; lifecycle EXPIRED forces EXPIRED.
 */
const oracle = (now: number, asOf: number, validUntil: number, lifecycle: LifecycleState): FreshnessState => {
  if (lifecycle === "EXPIRED") return "EXPIRED"
  const [n, a, v] = [BigInt(now), BigInt(asOf), BigInt(validUntil)]
  const w = v - a
  if (5n * n < 5n * v - w) return "CURRENT"
  if (n < v) return "APPROACHING_STALE"
  if (n < v + w) return "STALE"
  return "EXPIRED"
}

const notExpiredLifecycle = fc.constantFrom(...LifecycleStates.filter((s) => s !== "EXPIRED"))
const lifecycle = fc.constantFrom(...LifecycleStates)

/** as_of anywhere from 1970 to ~2250, a validity window from 1 ms to ~30 years. */
const window = fc.record({
  asOf: fc.integer({ min: 0, max: 9_000_000_000_000 }),
  w: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 1_000_000_000_000 }))
}).map(({ asOf, w }) => ({ asOf, validUntil: asOf + w, w }))

/** Instants around the window, with extra weight right at and beside each boundary. */
const instantFor = ({ asOf, validUntil, w }: { asOf: number; validUntil: number; w: number }) =>
  fc.oneof(
    fc.integer({ min: asOf - w, max: validUntil + 2 * w }),
    fc.tuple(fc.constantFrom(Math.ceil(validUntil - w / 5), validUntil, validUntil + w), fc.integer({ min: -2, max: 2 }))
      .map(([b, d]) => b + d)
  )

const windowAndInstant = window.chain((win) => fc.tuple(fc.constant(win), instantFor(win)))

describe("freshnessAt: the boundaries of docs/API.md §6.2", () => {
  // as_of 2030-01-01, valid_until 100 days later: w = 100 d, so 0.2w = 20 d.
  const asOf = Date.parse("2030-01-01T00:00:00.000Z")
  const validUntil = asOf + 100 * DAY
  const at = (now: number) => freshnessAt(now, asOf, validUntil, "NOT_ISSUED")

  it("is CURRENT strictly before valid_until - 0.2w", () => {
    expect(at(asOf - DAY)).toBe("CURRENT")
    expect(at(asOf)).toBe("CURRENT")
    expect(at(asOf + 80 * DAY - 1)).toBe("CURRENT")
  })

  it("is APPROACHING_STALE from valid_until - 0.2w until just before valid_until", () => {
    expect(at(asOf + 80 * DAY)).toBe("APPROACHING_STALE")
    expect(at(validUntil - 1)).toBe("APPROACHING_STALE")
  })

  it("is STALE from valid_until until just before valid_until + w", () => {
    expect(at(validUntil)).toBe("STALE")
    expect(at(validUntil + 100 * DAY - 1)).toBe("STALE")
  })

  it("is EXPIRED from valid_until + w on", () => {
    expect(at(validUntil + 100 * DAY)).toBe("EXPIRED")
    expect(at(validUntil + 1000 * DAY)).toBe("EXPIRED")
  })

  it("puts a fractional boundary at the first millisecond not before it", () => {
    // w = 7 ms: valid_until - 0.2w = valid_until - 1.4 ms, so valid_until - 2 is CURRENT and valid_until - 1 is not.
    expect(freshnessAt(1_000, 993, 1_000, "ACTIVE")).toBe("STALE")
    expect(freshnessAt(998, 993, 1_000, "ACTIVE")).toBe("CURRENT")
    expect(freshnessAt(999, 993, 1_000, "ACTIVE")).toBe("APPROACHING_STALE")
    expect(nextFreshnessBoundary(998, 993, 1_000)).toBe(999)
    // w = 1 ms: there is no APPROACHING_STALE millisecond at all.
    expect(freshnessAt(9, 9, 10, "ACTIVE")).toBe("CURRENT")
    expect(freshnessAt(10, 9, 10, "ACTIVE")).toBe("STALE")
    expect(freshnessAt(11, 9, 10, "ACTIVE")).toBe("EXPIRED")
  })

  it("is EXPIRED whenever the lifecycle is EXPIRED", () => {
    for (const now of [asOf - DAY, asOf, asOf + 80 * DAY, validUntil, validUntil + 200 * DAY]) {
      expect(freshnessAt(now, asOf, validUntil, "EXPIRED")).toBe("EXPIRED")
    }
  })

  it("does not depend on the other lifecycle states", () => {
    for (const state of LifecycleStates.filter((s) => s !== "EXPIRED")) {
      expect(freshnessAt(asOf, asOf, validUntil, state)).toBe("CURRENT")
      expect(freshnessAt(validUntil, asOf, validUntil, state)).toBe("STALE")
    }
  })

  it("matches the rule of docs/API.md §6.2 at every instant", () => fc.assert(fc.property(windowAndInstant, lifecycle, ([win, now], state) => {
    expect(freshnessAt(now, win.asOf, win.validUntil, state)).toBe(oracle(now, win.asOf, win.validUntil, state))
  }), { numRuns: 5000 }))

  it("never moves backwards as time passes", () => fc.assert(fc.property(window, fc.nat(), fc.nat(), notExpiredLifecycle, (win, a, b, state) => {
    const span = 3 * win.w + 10
    const [t1, t2] = [win.asOf - win.w + (a % span), win.asOf - win.w + (b % span)].sort((x, y) => x - y) as [number, number]
    expect(rank(freshnessAt(t1, win.asOf, win.validUntil, state)))
      .toBeLessThanOrEqual(rank(freshnessAt(t2, win.asOf, win.validUntil, state)))
  }), { numRuns: 2000 }))

  it("goes through the states in order, each boundary at its documented instant", () => fc.assert(fc.property(window, (win) => {
    const approaching = Math.ceil(win.validUntil - win.w / 5)
    const states = [approaching - 1, approaching, win.validUntil - 1, win.validUntil, win.validUntil + win.w - 1, win.validUntil + win.w]
      .map((t) => freshnessAt(t, win.asOf, win.validUntil, "NOT_ISSUED"))
    expect(states).toEqual(win.w >= 5
      ? ["CURRENT", "APPROACHING_STALE", "APPROACHING_STALE", "STALE", "STALE", "EXPIRED"]
      // Under 5 ms, 0.2w is less than a millisecond: no whole millisecond is APPROACHING_STALE.
      : ["CURRENT", "STALE", "CURRENT", "STALE", "STALE", "EXPIRED"])
  })))
})

describe("nextFreshnessBoundary", () => {
  it("names the three boundaries in turn, then null", () => {
    const asOf = Date.parse("2030-01-01T00:00:00.000Z")
    const validUntil = asOf + 100 * DAY
    expect(nextFreshnessBoundary(asOf, asOf, validUntil)).toBe(asOf + 80 * DAY)
    expect(nextFreshnessBoundary(asOf + 80 * DAY - 1, asOf, validUntil)).toBe(asOf + 80 * DAY)
    expect(nextFreshnessBoundary(asOf + 80 * DAY, asOf, validUntil)).toBe(validUntil)
    expect(nextFreshnessBoundary(validUntil - 1, asOf, validUntil)).toBe(validUntil)
    expect(nextFreshnessBoundary(validUntil, asOf, validUntil)).toBe(validUntil + 100 * DAY)
    expect(nextFreshnessBoundary(validUntil + 100 * DAY - 1, asOf, validUntil)).toBe(validUntil + 100 * DAY)
    expect(nextFreshnessBoundary(validUntil + 100 * DAY, asOf, validUntil)).toBeNull()
  })

  it("is exactly where the state next changes", () => fc.assert(fc.property(windowAndInstant, notExpiredLifecycle, ([win, now], state) => {
    const f = (t: number) => freshnessAt(t, win.asOf, win.validUntil, state)
    const next = nextFreshnessBoundary(now, win.asOf, win.validUntil)
    if (next === null) {
      expect(f(now)).toBe("EXPIRED")
      return
    }
    expect(next).toBeGreaterThan(now)
    expect(Number.isInteger(next)).toBe(true)
    // Unchanged up to the instant before the boundary (the state is monotone, so equal ends mean equal throughout)…
    expect(f(next - 1)).toBe(f(now))
    // …and different at it.
    expect(f(next)).not.toBe(f(now))
    expect(rank(f(next))).toBeGreaterThan(rank(f(now)))
  }), { numRuns: 5000 }))

  it("is null exactly when the state can no longer change", () => fc.assert(fc.property(windowAndInstant, ([win, now]) => {
    const next = nextFreshnessBoundary(now, win.asOf, win.validUntil)
    expect(next === null).toBe(freshnessAt(now, win.asOf, win.validUntil, "ACTIVE") === "EXPIRED")
  }), { numRuns: 2000 }))

  it("walking from boundary to boundary visits each later state once", () => fc.assert(fc.property(window, (win) => {
    const visited: Array<FreshnessState> = []
    let now: number | null = win.asOf - win.w
    while (now !== null) {
      visited.push(freshnessAt(now, win.asOf, win.validUntil, "NOT_ISSUED"))
      now = nextFreshnessBoundary(now, win.asOf, win.validUntil)
    }
    expect(visited[0]).toBe("CURRENT")
    expect(visited.at(-1)).toBe("EXPIRED")
    expect(new Set(visited).size).toBe(visited.length)
    expect(visited.map(rank)).toEqual([...visited.map(rank)].sort((a, b) => a - b))
  })))
})
