import { connect } from "node:net"
import { Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, expectProblem, putDetermination, request } from "../support/http.js"
import { startServerProcess } from "../support/process.js"
import { startTestServer, type TestServer } from "../support/server.js"

const id = "DET-V1-LIMITS-0001"
const machine = `/api/v1/trust/${id}/machine`
const kind = testDatabaseKind()

const fire = (base: string, key: string, n: number) =>
  Promise.all(Array.from({ length: n }, () =>
    fetch(base + machine, { headers: { authorization: `Bearer ${key}` } }).then(async (r) => (await r.text(), r.status))))

const redisReachable = () =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host: "127.0.0.1", port: 6379 })
    socket.setTimeout(1000)
    socket.once("connect", () => (socket.destroy(), resolve(true)))
    socket.once("error", () => resolve(false))
    socket.once("timeout", () => (socket.destroy(), resolve(false)))
  })

describe(`per-key limits (${kind})`, () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer()
    expect((await putDetermination(server, id, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
  })
  afterAll(() => server?.close())

  it("lets exactly the limit through in a minute, refuses the next with 429, and restores after the window", async () => {
    const { api_key } = await createKey(server, ["trust:read"], { rate_limit_per_minute: 5 })
    for (let i = 1; i <= 5; i++) {
      const ok = await request(server, "GET", machine, { bearer: api_key })
      expect(ok.status).toBe(200)
      expect(ok.headers.get("ratelimit-policy")).toBe(`"minute";q=5;w=60, "day";q=100000;w=86400`)
      expect(ok.headers.get("ratelimit")).toMatch(new RegExp(`^"minute";r=${5 - i};t=\\d+$`))
    }
    const refused = await request(server, "GET", machine, { bearer: api_key })
    expect(refused.status).toBe(429)
    expect(refused.headers.get("content-type")).toBe("application/problem+json")
    expect(refused.body.code).toBe("rate-limited")
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    expect(refused.headers.get("ratelimit")).toMatch(/^"minute";r=0;t=\d+$/)

    server.clock.advance(61_000)
    expect((await request(server, "GET", machine, { bearer: api_key })).status).toBe(200)
  })

  it("rolls the daily quota over at UTC midnight", async () => {
    const { api_key } = await createKey(server, ["trust:read"], { daily_quota: 3 })
    const dayStart = Math.floor(Date.now() / DAY_MS) * DAY_MS + 3 * DAY_MS
    server.clock.setTo(dayStart - 60_000) // 23:59:00 UTC
    for (let i = 0; i < 3; i++) expect((await request(server, "GET", machine, { bearer: api_key })).status).toBe(200)
    const refused = await request(server, "GET", machine, { bearer: api_key })
    expect(refused.status).toBe(429)
    expect(refused.body.code).toBe("quota-exceeded")
    const retryAfter = Number(refused.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThan(0)
    expect(retryAfter).toBeLessThanOrEqual(60)
    server.clock.setTo(dayStart + 1_000) // 00:00:01 UTC the next day
    expect((await request(server, "GET", machine, { bearer: api_key })).status).toBe(200)
    server.clock.setTo(Date.now())
  })

  it("never lets a concurrent burst of twice the limit through more than the limit", async () => {
    const { api_key } = await createKey(server, ["trust:read"], { rate_limit_per_minute: 25 })
    const statuses = await fire(server.baseUrl, api_key, 50)
    expect(statuses.filter((s) => s === 200)).toHaveLength(25)
    expect(statuses.filter((s) => s === 429)).toHaveLength(25)
  })

  it("counts MCP and refused-scope requests too, and sends the fields on every authenticated response", async () => {
    const { api_key } = await createKey(server, ["receipt:read"], { rate_limit_per_minute: 2 })
    const forbidden = await request(server, "GET", machine, { bearer: api_key })
    expect(forbidden.status).toBe(403)
    expect(forbidden.headers.get("ratelimit")).toMatch(/^"minute";r=1;t=\d+$/)
    const notFound = await request(server, "GET", "/api/v1/trust/DET-V1-NOPE/machine", { bearer: api_key })
    expect(notFound.headers.get("ratelimit")).toMatch(/^"minute";r=0;t=\d+$/)
    expect((await request(server, "GET", machine, { bearer: api_key })).status).toBe(429)
  })
})

describe(`per-address limits (${kind})`, () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer({
      config: { humanRateLimitPerMinute: 3, operatorRateLimitPerMinute: 50, authFailureLimitPerMinute: 3 }
    })
    expect((await putDetermination(server, id, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
  })
  afterAll(() => server?.close())

  it("limits the unauthenticated human endpoint per client address", async () => {
    for (let i = 0; i < 3; i++) expect((await request(server, "GET", `/api/v1/trust/${id}/human`)).status).toBe(200)
    const refused = await request(server, "GET", `/api/v1/trust/${id}/human`)
    expect(refused.status).toBe(429)
    expect(refused.body.code).toBe("rate-limited")
    server.clock.advance(61_000)
    expect((await request(server, "GET", `/api/v1/trust/${id}/human`)).status).toBe(200)
  })

  it("throttles an address's failed authentications, never its valid credentials (CONTRACT section 11)", async () => {
    const { api_key } = await createKey(server, ["trust:read"])
    const guess = `pv_live_${"A".repeat(38)}`
    for (let i = 0; i < 3; i++) expect((await request(server, "GET", machine, { bearer: guess })).status).toBe(401)
    const throttled = expectProblem(await request(server, "GET", machine, { bearer: guess }), 429, "rate-limited")
    expect(throttled.detail).toMatch(/failed authentications/)
    expect(Number((await request(server, "GET", machine, { bearer: guess })).headers.get("retry-after"))).toBeGreaterThan(0)
    expect((await request(server, "GET", machine, { bearer: api_key })).status).toBe(200)
    expect((await request(server, "GET", "/api/v1/api-keys", { bearer: server.operatorToken })).status).toBe(200)
    expectProblem(await request(server, "GET", "/api/v1/api-keys", { bearer: "not-the-operator-token-0123456789abcdef" }), 429, "rate-limited")
    server.clock.advance(61_000)
    try {
      expect((await request(server, "GET", machine, { bearer: guess })).status).toBe(401)
    } finally {
      server.clock.advance(-61_000)
    }
  })
})

describe(`operator endpoints are limited per address (${kind})`, () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer({ config: { operatorRateLimitPerMinute: 2 } })
  })
  afterAll(() => server?.close())

  it("refuses the third operator request in a minute", async () => {
    const op = { bearer: server.operatorToken }
    expect((await request(server, "GET", "/api/v1/api-keys", op)).status).toBe(200)
    expect((await request(server, "GET", "/api/v1/api-keys", op)).status).toBe(200)
    const refused = await request(server, "GET", "/api/v1/api-keys", op)
    expect(refused.status).toBe(429)
    expect(refused.body.code).toBe("rate-limited")
  })
})

describe.runIf(kind === "postgres")("two server processes sharing one PostgreSQL", () => {
  let a: TestServer
  let b: Awaited<ReturnType<typeof startServerProcess>>
  beforeAll(async () => {
    a = await startTestServer()
    expect((await putDetermination(a, id, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
    b = await startServerProcess({ DATABASE_URL: a.databaseUrl!, PV_OPERATOR_TOKEN: a.operatorToken })
  }, 120_000)
  afterAll(async () => {
    await b?.stop()
    await a?.close()
  })

  it("lets exactly the limit through a burst split across both", async () => {
    const { api_key } = await createKey(a, ["trust:read"], { rate_limit_per_minute: 20 })
    const [fromA, fromB] = await Promise.all([fire(a.baseUrl, api_key, 20), fire(b.baseUrl, api_key, 20)])
    const all = [...fromA, ...fromB]
    expect(all.filter((s) => s === 200)).toHaveLength(20)
    expect(all.filter((s) => s === 429)).toHaveLength(20)
  })

  it("sees a revocation made on the other instance within 2 s", async () => {
    const { api_key, key_id } = await createKey(a, ["trust:read"])
    const onB = () => fetch(b.baseUrl + machine, { headers: { authorization: `Bearer ${api_key}` } }).then((r) => r.status)
    expect(await onB()).toBe(200) // now cached on B
    expect((await request(a, "DELETE", `/api/v1/api-keys/${key_id}`, { bearer: a.operatorToken })).status).toBe(204)
    expect((await request(a, "GET", machine, { bearer: api_key })).status).toBe(401) // same instance: at once
    await new Promise((r) => setTimeout(r, 2_000))
    expect(await onB()).toBe(401)
  })
})

describe.runIf(kind === "postgres")("two instances sharing Redis", () => {
  let a: TestServer
  let b: TestServer
  let available = false
  beforeAll(async () => {
    available = await redisReachable()
    if (!available) return
    const redisUrl = Option.some(Redacted.make("redis://127.0.0.1:6379/0"))
    a = await startTestServer({ config: { redisUrl } })
    b = await startTestServer({ config: { redisUrl }, databaseUrl: a.databaseUrl! })
    const put = await putDetermination(a, id, determinationBody(Date.now() - DAY_MS))
    expect(put.status, put.text).toBe(201)
  })
  afterAll(async () => {
    await b?.close()
    await a?.close()
  })

  it("lets exactly the limit through a burst split across both (skipped without Redis)", async (ctx) => {
    if (!available) return ctx.skip()
    const { api_key } = await createKey(a, ["trust:read"], { rate_limit_per_minute: 20 })
    const [fromA, fromB] = await Promise.all([fire(a.baseUrl, api_key, 20), fire(b.baseUrl, api_key, 20)])
    expect([...fromA, ...fromB].filter((s) => s === 200)).toHaveLength(20)
  })
})

describe(`body limits before any work (${kind})`, () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server?.close())

  const nested = (depth: number): unknown => (depth <= 1 ? "x" : [nested(depth - 1)])

  it("refuses JSON nested deeper than 32 levels with 422 and stores nothing", async () => {
    const deep = await request(server, "POST", "/api/v1/api-keys", {
      bearer: server.operatorToken,
      body: { tenant_id: "deep", name: nested(40), scopes: ["trust:read"] }
    })
    expect(deep.status).toBe(422)
    expect(deep.body.code).toBe("validation-failed")
    expect(deep.body.errors).toEqual([{ pointer: "", detail: "nesting deeper than 32 levels" }])
    // A shallow body with the same wrong field reaches schema validation instead.
    const shallow = await request(server, "POST", "/api/v1/api-keys", {
      bearer: server.operatorToken,
      body: { tenant_id: "deep", name: nested(3), scopes: ["trust:read"] }
    })
    expect(shallow.status).toBe(422)
    expect(shallow.body.errors.map((e: { pointer: string }) => e.pointer)).toContain("/name")
    const list = await request(server, "GET", "/api/v1/api-keys?tenant_id=deep", { bearer: server.operatorToken })
    expect(list.body.keys).toEqual([])
  })
})
