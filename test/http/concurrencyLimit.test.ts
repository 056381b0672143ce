import { describe, expect, it } from "vitest"
import * as fc from "fast-check"
import { DefaultGradient, fixedLimit, gradientLimit, type GradientOptions } from "../../src/http/ConcurrencyLimit.js"
import { OverloadedDetail, overloadedBody } from "../../src/http/FrontDoor.js"
import { Overloaded, toProblemDocument } from "../../src/domain/Problem.js"
import { isAcceptableRequestId, problemInstance } from "../../src/observability/RequestRecord.js"

const options: GradientOptions = { ...DefaultGradient, windowSamples: 10 }

/** Feed `windows` full windows of samples at `rttMs`, each with `inFlight` requests in flight. */
const feed = (limit: ReturnType<typeof gradientLimit>, windows: number, rttMs: number, inFlight: (limit: number) => number) => {
  for (let w = 0; w < windows; w++) {
    for (let i = 0; i < options.windowSamples; i++) limit.sample(rttMs, inFlight(limit.current()))
  }
}

describe("the adaptive concurrency limit (gradient)", () => {
  it("stays within [min, max] and is an integer, whatever the samples", () => {
    fc.assert(fc.property(
      fc.array(fc.tuple(fc.oneof(fc.double({ min: 0, max: 1e6, noNaN: true }), fc.constantFrom(NaN, -1, Infinity)), fc.integer({ min: 0, max: 5_000 })),
        { maxLength: 2_000 }),
      (samples) => {
        const limit = gradientLimit(options)
        for (const [rtt, inFlight] of samples) {
          limit.sample(rtt, inFlight)
          const current = limit.current()
          expect(Number.isInteger(current)).toBe(true)
          expect(current).toBeGreaterThanOrEqual(options.min)
          expect(current).toBeLessThanOrEqual(options.max)
        }
      }
    ))
  })

  it("grows while requests keep their usual latency and the limit is in use, up to the maximum", () => {
    fc.assert(fc.property(fc.double({ min: 0.1, max: 500, noNaN: true }), (rtt) => {
      const limit = gradientLimit(options)
      let previous = limit.current()
      for (let w = 0; w < 400; w++) {
        feed(limit, 1, rtt, (current) => current)
        expect(limit.current()).toBeGreaterThanOrEqual(previous)
        previous = limit.current()
      }
      expect(limit.current()).toBe(options.max)
    }))
  })

  it("shrinks when requests take much longer than usual (they queue), down to the minimum", () => {
    fc.assert(fc.property(fc.double({ min: 0.5, max: 50, noNaN: true }), fc.double({ min: 4, max: 50, noNaN: true }), (rtt, slowdown) => {
      const limit = gradientLimit(options)
      feed(limit, 5, rtt, (current) => current)
      const before = limit.current()
      feed(limit, 3, rtt * slowdown, (current) => current)
      expect(limit.current()).toBeLessThan(before)
      feed(limit, 300, rtt * slowdown * 10, (current) => current)
      expect(limit.current()).toBeLessThan(before / 2)
    }))
  })

  it("does not move on windows that used less than half of it (an idle process says nothing about capacity)", () => {
    fc.assert(fc.property(fc.double({ min: 0.1, max: 500, noNaN: true }), fc.double({ min: 0.1, max: 500, noNaN: true }), (a, b) => {
      const limit = gradientLimit(options)
      const initial = limit.current()
      feed(limit, 20, a, () => 1)
      feed(limit, 20, b, () => 2)
      expect(limit.current()).toBe(initial)
    }))
  })

  it("a pinned limit never moves", () => {
    const limit = fixedLimit(7)
    limit.sample(1_000, 7)
    limit.sample(0.1, 7)
    expect(limit.current()).toBe(7)
  })
})

describe("the 503 overloaded refusal, encoded once (http/FrontDoor.ts)", () => {
  it("is byte for byte the problem document of Overloaded with the request's instance, whatever the request id", () => {
    const expected = (id: string) => JSON.stringify(toProblemDocument(new Overloaded({ detail: OverloadedDetail }), problemInstance(id)))
    for (const id of ["0b0d3c2e-7c1a-4a51-9a43-3d4f7e2f1a10", "a", "x".repeat(128), "%\"\\<>{}", "PVREQUESTID"]) {
      expect(overloadedBody(id)).toBe(expected(id))
    }
    fc.assert(fc.property(fc.stringMatching(/^[\x21-\x7e]{1,128}$/), (id) => {
      expect(isAcceptableRequestId(id)).toBe(true)
      const body = overloadedBody(id)
      expect(body).toBe(expected(id))
      expect(JSON.parse(body)).toMatchObject({ status: 503, code: "overloaded", instance: problemInstance(id) })
    }))
  })
})
