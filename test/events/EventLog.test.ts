import { it } from "@effect/vitest"
import * as fc from "fast-check"
import { describe, expect } from "vitest"
import { PublicId } from "../../src/domain/PublicId.js"
import { changeEventOf, type DeterminationChange } from "../../src/events/EventLog.js"
import { freshnessAt, freshnessTimeline, LifecycleStates } from "../../src/domain/Freshness.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"

const asOf = Date.UTC(2025, 0, 1)
const change = (overrides: Partial<DeterminationChange>): DeterminationChange => ({
  public_id: PublicId.make("DET-V1-X"),
  determination_id: "dv_1",
  version: 2,
  determination_digest: "d".repeat(64),
  previous: determinationBody(asOf),
  body: determinationBody(asOf, { tier: "T3" }),
  changed_fields: ["tier"],
  ...overrides
})

describe("one stored change, one event", () => {
  it("the first version is determination.recorded", () => {
    expect(changeEventOf(change({ previous: null, version: 1, changed_fields: ["tier"] }), "CURRENT")).toEqual({
      type: "determination.recorded",
      payload: { determination_id: "dv_1", version: 1, determination_digest: "d".repeat(64), lifecycle_state: "NOT_ISSUED", freshness_state: "CURRENT" }
    })
  })

  it("a later version is determination.updated listing the changed top-level fields", () => {
    expect(changeEventOf(change({}), "APPROACHING_STALE")).toEqual({
      type: "determination.updated",
      payload: { determination_id: "dv_1", version: 2, determination_digest: "d".repeat(64), changed_fields: ["tier"], freshness_state: "APPROACHING_STALE" }
    })
  })

  it("a version that moves lifecycle_state is lifecycle.changed, still listing every changed field", () => {
    const next = determinationBody(asOf, { tier: "T3", lifecycle_state: "SUSPENDED" })
    expect(changeEventOf(change({ body: next, changed_fields: ["lifecycle_state", "tier"] }), "CURRENT")).toEqual({
      type: "lifecycle.changed",
      payload: {
        determination_id: "dv_1", version: 2, determination_digest: "d".repeat(64),
        previous_lifecycle_state: "NOT_ISSUED", lifecycle_state: "SUSPENDED", changed_fields: ["lifecycle_state", "tier"],
        freshness_state: "CURRENT"
      }
    })
  })
})

describe("freshness timeline (what the sweep announces)", () => {
  const windows = fc.record({
    asOf: fc.integer({ min: 0, max: 4_000_000_000_000 }),
    w: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 400 * DAY_MS })),
    lifecycle: fc.constantFrom(...LifecycleStates)
  })

  it("at every instant, the state is the last entry started by then (CURRENT before any)", () => fc.assert(fc.property(
    windows.chain((win) => fc.tuple(fc.constant(win), fc.integer({ min: win.asOf, max: win.asOf + 3 * win.w }))),
    ([{ asOf: start, w, lifecycle }, t]) => {
      const timeline = freshnessTimeline(start, start + w, lifecycle)
      const started = timeline.filter((entry) => entry.at <= t)
      const expected = lifecycle === "EXPIRED" ? "EXPIRED" : started[started.length - 1]?.state ?? "CURRENT"
      expect(freshnessAt(t, start, start + w, lifecycle)).toBe(expected)
    })))

  it("each entry starts exactly at its boundary, in order, never repeating a state", () => fc.assert(fc.property(windows, ({ asOf: start, w, lifecycle }) => {
    const timeline = freshnessTimeline(start, start + w, lifecycle)
    if (lifecycle === "EXPIRED") expect(timeline).toEqual([])
    else expect(timeline.map((e) => e.state)).toEqual(w >= 5 ? ["APPROACHING_STALE", "STALE", "EXPIRED"] : ["STALE", "EXPIRED"])
    for (const entry of timeline) {
      expect(freshnessAt(entry.at, start, start + w, lifecycle)).toBe(entry.state)
      expect(freshnessAt(entry.at - 1, start, start + w, lifecycle)).not.toBe(entry.state)
    }
    expect(new Set(timeline.map((e) => e.state)).size).toBe(timeline.length)
  })))

  it("a 100-day window enters APPROACHING_STALE at day 80, STALE at day 100, EXPIRED at day 200", () => {
    expect(freshnessTimeline(asOf, asOf + 100 * DAY_MS, "NOT_ISSUED")).toEqual([
      { state: "APPROACHING_STALE", at: asOf + 80 * DAY_MS },
      { state: "STALE", at: asOf + 100 * DAY_MS },
      { state: "EXPIRED", at: asOf + 200 * DAY_MS }
    ])
  })
})
