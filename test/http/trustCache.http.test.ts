import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

const kind = testDatabaseKind()
const id = "DET-V1-CACHE-0001"
const human = `/api/v1/trust/${id}/human`

describe(`cached trust documents (${kind})`, () => {
  let a: TestServer
  beforeAll(async () => {
    a = await startTestServer()
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
    const now = Date.now()
    a.clock.setTo(now + 200 * DAY_MS) // past valid_until + w: EXPIRED, and cached
    expect((await request(a, "GET", human)).body.freshness.state).toBe("EXPIRED")
    a.clock.setTo(now)
    expect((await request(a, "GET", human)).body.freshness.state).toBe("CURRENT")
  })
})

describe.runIf(kind === "postgres")("cached trust documents across instances", () => {
  let a: TestServer
  let b: TestServer
  beforeAll(async () => {
    a = await startTestServer()
    b = await startTestServer({ databaseUrl: a.databaseUrl! })
    expect((await putDetermination(a, id, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
  })
  afterAll(async () => {
    await b?.close()
    await a?.close()
  })

  it("drops another instance's cached document when a write commits (LISTEN/NOTIFY), well inside the 5 s bound", async () => {
    const cached = await request(b, "GET", human)
    expect((await request(b, "GET", human)).body.trust_state_digest).toBe(cached.body.trust_state_digest)
    expect((await putDetermination(a, id, determinationBody(Date.now() - DAY_MS, { tier: "T0", eligible: false }))).status).toBe(200)
    const started = Date.now()
    let seen = cached.body
    while (seen.determination.tier !== "T0" && Date.now() - started < 4_000) {
      await new Promise((r) => setTimeout(r, 25))
      seen = (await request(b, "GET", human)).body
    }
    expect(seen.determination.tier).toBe("T0")
    expect(Date.now() - started).toBeLessThan(1_000)
    expect(seen).toEqual((await request(a, "GET", human)).body)
  })
})
