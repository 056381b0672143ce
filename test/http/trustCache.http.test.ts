import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { withShiftedClock } from "../support/clockShift.js"
import { putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { isolatedConfig } from "../support/testConfig.js"

const kind = testDatabaseKind()
const id = "DET-V1-CACHE-0001"
const human = `/api/v1/trust/${id}/human`

describe(`cached trust documents (${kind})`, () => {
  let a: TestServer
  beforeAll(async () => {
    a = await startTestServer({ config: isolatedConfig() })
    expect((await putDetermination(a, id, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
  })
  afterAll(() => a?.close())

  it("reads its own writes at once", async () => {
    const before = await request(a, "GET", human)
    const put = await putDetermination(a, id, determinationBody(Date.now() - DAY_MS, { tier: "T4" }))
    expect(put.body.outcome).toBe("updated")
    const after = await request(a, "GET", human)
    expect(after.body.determination.tier).toBe("T4")
    expect(after.body.integrity.event_head.sequence).toBe(before.body.integrity.event_head.sequence + 1)
  })

  it("never serves a document from before a clock move back", async () => {
    await withShiftedClock(a.clock, async (shift) => {
      const now = Date.now()
      shift.to(now + 200 * DAY_MS) // past valid_until + w: EXPIRED, and cached
      expect((await request(a, "GET", human)).body.freshness.state).toBe("EXPIRED")
      shift.to(now)
      expect((await request(a, "GET", human)).body.freshness.state).toBe("CURRENT")
    })
  })
})

describe.runIf(kind === "postgres")("cached trust documents across instances", () => {
  let a: TestServer
  let b: TestServer
  beforeAll(async () => {
    a = await startTestServer({ config: isolatedConfig() })
    b = await startTestServer({ config: isolatedConfig(), databaseUrl: a.databaseUrl! })
    expect((await putDetermination(a, id, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
  })
  afterAll(async () => {
    await b?.close()
    await a?.close()
  })

  /**
   * B's clock is held at the instant it cached the document, so its entry never reaches the 5 s bound
   * (TrustCacheMaxAgeMs) however slowly this runs: B can only answer with the new state because the
   * write's notification evicted the entry. Real time only bounds how long the test waits.
   */
  it("drops another instance's cached document when a write commits (LISTEN/NOTIFY), not by its age", async () => {
    await withShiftedClock(b.clock, async (shift) => {
      const cachedAt = b.clock.currentTimeMillisUnsafe()
      const cached = await request(b, "GET", human)
      const onB = async () => {
        shift.to(cachedAt + 1_000)
        return (await request(b, "GET", human)).body
      }
      // Held there, B answers the state it cached...
      expect((await onB()).trust_state_digest).toBe(cached.body.trust_state_digest)
      expect((await putDetermination(a, id, determinationBody(Date.now() - DAY_MS, { tier: "T0", eligible: false }))).status).toBe(200)
      // ...until the notification arrives.
      const deadline = Date.now() + 20_000
      let seen = await onB()
      while (seen.determination.tier !== "T0" && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 25))
        seen = await onB()
      }
      expect(seen.determination.tier).toBe("T0")
      expect(seen.integrity.event_head.sequence).toBe(cached.body.integrity.event_head.sequence + 1)
      expect(seen).toEqual((await request(a, "GET", human)).body)
    })
  })
})
