import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { holdScope, MaxRetryAfterMs, parseHttpDate, receiverSignal, retryAfterMs } from "../../src/webhooks/Signals.js"

const Now = Date.UTC(2026, 10, 28, 22, 0, 0)
// Whole seconds (an HTTP-date has no finer resolution) from 1970 to 9999.
const instant = fc.integer({ min: 0, max: 253_402_300_799 }).map((s) => s * 1000)
const now = fc.integer({ min: 0, max: 4_102_444_800 }).map((s) => s * 1000)
const backoff = fc.integer({ min: 750, max: 300_000 })

const Days = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
const Months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
const two = (n: number) => String(n).padStart(2, "0")
const time = (d: Date) => `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`
/** The obsolete RFC 850 form, e.g. "Sunday, 06-Nov-94 08:49:37 GMT". */
const rfc850 = (d: Date) =>
  `${Days[d.getUTCDay()]}, ${two(d.getUTCDate())}-${Months[d.getUTCMonth()]}-${two(d.getUTCFullYear() % 100)} ${time(d)} GMT`
/** The obsolete asctime form, e.g. "Sun Nov  6 08:49:37 1994". */
const asctime = (d: Date) =>
  `${Days[d.getUTCDay()]!.slice(0, 3)} ${Months[d.getUTCMonth()]} ${String(d.getUTCDate()).padStart(2, " ")} ${time(d)} ${d.getUTCFullYear()}`

describe("parseHttpDate (RFC 9110 §5.6.7)", () => {
  it("reads back every IMF-fixdate (what Date#toUTCString prints) exactly", () => {
    fc.assert(fc.property(instant, (at) => {
      const text = new Date(at).toUTCString()
      fc.pre(/^\w{3}, \d{2} \w{3} \d{4} /.test(text))
      expect(parseHttpDate(text, Now)).toBe(at)
    }), { numRuns: 3000 })
    expect(parseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT", Now)).toBe(Date.UTC(1994, 10, 6, 8, 49, 37))
  })

  it("reads the obsolete asctime form, and RFC 850's two-digit year within 50 years of now", () => {
    fc.assert(fc.property(instant.filter((at) => new Date(at).getUTCFullYear() >= 1000), (at) => {
      expect(parseHttpDate(asctime(new Date(at)), Now)).toBe(at)
    }), { numRuns: 2000 })
    fc.assert(fc.property(fc.integer({ min: -49 * 365, max: 49 * 365 }), fc.integer({ min: 0, max: 86_399 }), (days, seconds) => {
      const at = Now + days * 86_400_000 + seconds * 1000
      expect(parseHttpDate(rfc850(new Date(at)), Now)).toBe(at)
    }), { numRuns: 2000 })
    expect(parseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT", Now)).toBe(Date.UTC(1994, 10, 6, 8, 49, 37))
    expect(parseHttpDate("Sun Nov  6 08:49:37 1994", Now)).toBe(Date.UTC(1994, 10, 6, 8, 49, 37))
  })

  it("refuses anything else, impossible dates included", () => {
    for (const bad of [
      "", "0", "tomorrow", "2026-11-28T22:00:00Z", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT",
      "Sun, 31 Feb 2026 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT", "sun, 06 nov 1994 08:49:37 gmt",
      "Sun, 06 Nov 1994 08:49:37 GMT junk", "Funday, 06-Nov-94 08:49:37 GMT", "Sun Nov 6 08:49:37 1994"
    ]) expect(parseHttpDate(bad, Now), bad).toBeNull()
    fc.assert(fc.property(fc.string(), (text) => {
      const parsed = parseHttpDate(text, Now)
      if (parsed !== null) expect(Number.isFinite(parsed)).toBe(true)
    }), { numRuns: 3000 })
  })
})

describe("retryAfterMs", () => {
  it("delta-seconds: that many seconds, capped at an hour", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 10_000_000 }), now, (seconds, at) => {
      expect(retryAfterMs(String(seconds), at)).toBe(Math.min(seconds * 1000, MaxRetryAfterMs))
      expect(retryAfterMs(` ${seconds} `, at)).toBe(Math.min(seconds * 1000, MaxRetryAfterMs))
    }), { numRuns: 3000 })
    expect(MaxRetryAfterMs).toBe(3_600_000)
    expect(retryAfterMs("9".repeat(400), Now)).toBe(MaxRetryAfterMs)
  })

  it("an HTTP-date: the time until it, 0 when it has passed, capped at an hour", () => {
    fc.assert(fc.property(instant, now, (at, from) => {
      const text = new Date(at).toUTCString()
      fc.pre(/^\w{3}, \d{2} \w{3} \d{4} /.test(text))
      expect(retryAfterMs(text, from)).toBe(Math.min(MaxRetryAfterMs, Math.max(0, at - from)))
    }), { numRuns: 3000 })
  })

  it("is null when absent or not a valid value, and otherwise always within [0, 1 h]", () => {
    expect(retryAfterMs(undefined, Now)).toBeNull()
    for (const bad of ["", "-1", "1.5", "+3", "3s", "0x10", "Infinity", "NaN", "1e3"]) expect(retryAfterMs(bad, Now), bad).toBeNull()
    fc.assert(fc.property(fc.string(), now, (text, at) => {
      const ms = retryAfterMs(text, at)
      if (ms !== null) {
        expect(ms).toBeGreaterThanOrEqual(0)
        expect(ms).toBeLessThanOrEqual(MaxRetryAfterMs)
      }
    }), { numRuns: 3000 })
  })
})

describe("receiverSignal", () => {
  const status = fc.integer({ min: 100, max: 599 })
  const header = fc.oneof(fc.constant(undefined), fc.integer({ min: 0, max: 100_000 }).map(String), fc.string())

  it("410 Gone disables; nothing else does", () => {
    fc.assert(fc.property(fc.option(status, { nil: undefined }), header, backoff, (s, retryAfter, b) => {
      expect(receiverSignal({ status: s, retryAfter }, b, Now).gone).toBe(s === 410)
    }), { numRuns: 2000 })
  })

  it("never retries sooner than the backoff; 429 and 503 wait for their Retry-After (at most an hour), other statuses ignore it", () => {
    fc.assert(fc.property(fc.option(status, { nil: undefined }), header, backoff, (s, retryAfter, b) => {
      const { retryMs } = receiverSignal({ status: s, retryAfter }, b, Now)
      const asked = retryAfterMs(retryAfter, Now)
      expect(retryMs).toBeGreaterThanOrEqual(b)
      expect(retryMs).toBeLessThanOrEqual(Math.max(b, MaxRetryAfterMs))
      expect(retryMs).toBe(s === 429 || s === 503 ? Math.max(b, asked ?? 0) : b)
    }), { numRuns: 3000 })
    expect(receiverSignal({ status: 429, retryAfter: "30" }, 1_000, Now).retryMs).toBe(30_000)
    expect(receiverSignal({ status: 503, retryAfter: new Date(Now + 120_000).toUTCString() }, 1_000, Now).retryMs).toBe(120_000)
    expect(receiverSignal({ status: 503, retryAfter: "99999" }, 1_000, Now).retryMs).toBe(3_600_000)
    expect(receiverSignal({ status: 500, retryAfter: "30" }, 1_000, Now).retryMs).toBe(1_000)
    expect(receiverSignal({ status: 429, retryAfter: "0" }, 8_000, Now).retryMs).toBe(8_000)
  })
})

describe("holdScope", () => {
  const scope = fc.constantFrom("origin" as const, "url" as const)
  const status = fc.option(fc.integer({ min: 100, max: 599 }), { nil: undefined })
  const at = fc.option(fc.integer({ min: 0, max: 2_000_000 }), { nil: undefined })
  const startedAt = fc.integer({ min: 0, max: 2_000_000 })
  // What got through: the URL's latest delivery is one of the origin's, so the origin's is never older.
  const answers = fc.tuple(at, at).map(([url, other]) => ({
    url,
    origin: url === undefined ? other : other === undefined ? url : Math.max(url, other)
  }))

  it("narrows a failure's group by what got through after the attempt began: the same URL, nobody else; another path, the URL; never a 429 or 503", () => {
    fc.assert(fc.property(scope, status, startedAt, answers, (s, st, started, answered) => {
      const held = holdScope({ scope: s, status: st }, started, answered)
      const since = (ms: number | undefined) => ms !== undefined && ms > started
      if (st === 429 || st === 503) expect(held).toBe(s)
      else if (since(answered.url)) expect(held).toBe("none")
      else if (since(answered.origin)) expect(held).toBe("url")
      else expect(held).toBe(s)
      // Never wider than the attempt's own classification.
      if (s === "url") expect(held).not.toBe("origin")
    }), { numRuns: 5000 })
    // An answer before the attempt began, or at its start, proves nothing.
    expect(holdScope({ scope: "origin" }, 10, { origin: 20, url: undefined })).toBe("url")
    expect(holdScope({ scope: "origin" }, 10, { origin: 20, url: 20 })).toBe("none")
    expect(holdScope({ scope: "url", status: 404 }, 10, { origin: 20, url: 20 })).toBe("none")
    expect(holdScope({ scope: "url", status: 404 }, 10, { origin: 20, url: 5 })).toBe("url")
    expect(holdScope({ scope: "origin" }, 10, { origin: 10, url: 10 })).toBe("origin")
    expect(holdScope({ scope: "origin", status: 500 }, 10, { origin: undefined, url: undefined })).toBe("origin")
    expect(holdScope({ scope: "origin", status: 429 }, 10, { origin: 20, url: 20 })).toBe("origin")
    expect(holdScope({ scope: "origin", status: 503 }, 10, { origin: 20, url: 20 })).toBe("origin")
  })
})
