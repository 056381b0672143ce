import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { MaxPreferWaitSeconds, preferredWaitSeconds } from "../../src/receipts/PreferWait.js"

const token = fc.stringMatching(/^[a-z][a-z-]{0,10}$/).filter((t) => t !== "wait")
const other = fc.tuple(token, fc.option(fc.stringMatching(/^[a-z0-9]{1,6}$/), { nil: undefined }))
  .map(([name, value]) => value === undefined ? name : `${name}=${value}`)

describe("preferredWaitSeconds (RFC 7240 wait, 1..10)", () => {
  it("reads wait=n for every n in 1..10, quoted or not, among other preferences and parameters", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: MaxPreferWaitSeconds }), fc.array(other, { maxLength: 3 }), fc.array(other, { maxLength: 3 }), fc.boolean(), fc.constantFrom("wait", "WAIT", "Wait"),
      (n, before, after, quoted, name) => {
        const wait = `${name} = ${quoted ? `"${n}"` : n}`
        expect(preferredWaitSeconds([...before, wait, ...after].join(", "))).toBe(n)
      }))
  })

  it("ignores any integer outside 1..10 and anything that is not an integer", () => {
    fc.assert(fc.property(fc.oneof(fc.integer({ min: -1000, max: 0 }), fc.integer({ min: MaxPreferWaitSeconds + 1, max: 10_000_000 })), (n) => {
      expect(preferredWaitSeconds(`wait=${n}`)).toBeUndefined()
    }))
    // The value as sent (no "," or ";", which would end it) is what must not be a wait of 1..10: filtered after the
    // removal, so that ",1" (sent as "1") is not taken for a non-integer.
    fc.assert(fc.property(fc.string().map((s) => s.replace(/[,;]/g, "")).filter((s) => !/^\s*"?(10|0?[1-9])"?\s*$/.test(s)), (value) => {
      expect(preferredWaitSeconds(`wait=${value}`)).toBeUndefined()
    }))
  })

  it("never throws and gives undefined or an integer in 1..10 for any header", () => {
    fc.assert(fc.property(fc.string(), (header) => {
      const seconds = preferredWaitSeconds(header)
      expect(seconds === undefined || (Number.isInteger(seconds) && seconds >= 1 && seconds <= MaxPreferWaitSeconds)).toBe(true)
    }))
  })

  it("counts the first wait only, and none without one", () => {
    expect(preferredWaitSeconds("wait=2, wait=5")).toBe(2)
    expect(preferredWaitSeconds("wait=0, wait=5")).toBeUndefined()
    expect(preferredWaitSeconds("foo=\"a,wait=3\", wait=4")).toBe(4)
    expect(preferredWaitSeconds("respond-async")).toBeUndefined()
    expect(preferredWaitSeconds(undefined)).toBeUndefined()
    expect(preferredWaitSeconds("wait=5; foo=bar")).toBe(5)
  })
})
