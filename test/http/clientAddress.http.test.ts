import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, expectProblem, putDetermination, type Reply, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * docs/API.md §3.7 and §4.2: the client address is the socket peer, unless that peer is a
 * trusted proxy (PV_TRUSTED_PROXIES): then the right-most X-Forwarded-For / Forwarded address that is not
 * itself trusted. Every per-address limit uses it. Failed-authentication throttling refuses further
 * failing attempts, never a request whose credential is valid.
 *
 * Tests connect from 127.0.0.1. Every test uses addresses of its own, so budgets never carry over
 * between tests (windows start at an address's first request).
 */

const kind = testDatabaseKind()
const id = "DET-V1-ADDRESS-0001"
const humanPath = `/api/v1/trust/${id}/human`
const machinePath = `/api/v1/trust/${id}/machine`
const LIMIT = 3
const guess = `pv_live_${"A".repeat(38)}`

const human = (server: TestServer, headers: Record<string, string> = {}) => request(server, "GET", humanPath, { headers })

const expectRateLimited = (reply: Reply) => {
  expectProblem(reply, 429, "rate-limited")
  expect(Number(reply.headers.get("retry-after")), "Retry-After").toBeGreaterThan(0)
}

/** Use up the human budget with `headers`, then check the next request with them is refused. */
const exhaustHuman = async (server: TestServer, headers: Record<string, string>) => {
  for (let i = 0; i < LIMIT; i++) {
    const ok = await human(server, headers)
    expect(ok.status, `request ${i + 1} with ${JSON.stringify(headers)}: ${ok.text}`).toBe(200)
  }
  expectRateLimited(await human(server, headers))
}

const setup = async (config: Parameters<typeof startTestServer>[0]) => {
  const server = await startTestServer(config)
  const put = await putDetermination(server, id, determinationBody(Date.now() - DAY_MS))
  expect(put.status, put.text).toBe(201)
  return server
}

describe(`client address behind a trusted proxy (${kind})`, () => {
  let server: TestServer
  let api_key: string
  beforeAll(async () => {
    server = await setup({
      config: { trustedProxies: ["127.0.0.1/32"], humanRateLimitPerMinute: LIMIT, authFailureLimitPerMinute: LIMIT }
    })
    api_key = (await createKey(server, ["trust:read"])).api_key
  })
  afterAll(() => server?.close())

  it("limits /human per X-Forwarded-For address: one address's budget does not touch another's", async () => {
    await exhaustHuman(server, { "x-forwarded-for": "203.0.113.1" })
    const other = await human(server, { "x-forwarded-for": "203.0.113.2" })
    expect(other.status, other.text).toBe(200)
    // And the proxy's own address (a request without the header) is a client of its own.
    expect((await human(server)).status).toBe(200)
    expectRateLimited(await human(server, { "x-forwarded-for": "203.0.113.1" }))
  })

  it("understands RFC 7239 Forwarded: for=<IPv4>", async () => {
    await exhaustHuman(server, { forwarded: "for=203.0.113.3" })
    expect((await human(server, { forwarded: "for=203.0.113.4" })).status).toBe(200)
    // The same client, however the header spells it.
    expectRateLimited(await human(server, { forwarded: "For=\"203.0.113.3\";proto=https" }))
  })

  it("understands RFC 7239 Forwarded: for=\"[IPv6]:port\" (the port is not part of the address)", async () => {
    await exhaustHuman(server, { forwarded: "for=\"[2001:db8::1]:4711\"" })
    expectRateLimited(await human(server, { forwarded: "for=\"[2001:db8::1]:9999\"" }))
    expectRateLimited(await human(server, { forwarded: "for=\"[2001:db8::1]\"" }))
    expect((await human(server, { forwarded: "for=\"[2001:db8::2]:4711\"" })).status).toBe(200)
  })

  it("takes the right-most untrusted address, so a client cannot buy a fresh budget by prepending addresses", async () => {
    // The trusted proxy appended the real client (203.0.113.50); what the client sent before it is not believed.
    for (let i = 0; i < LIMIT; i++) {
      const ok = await human(server, { "x-forwarded-for": `198.18.0.${i + 1}, 203.0.113.50` })
      expect(ok.status, ok.text).toBe(200)
    }
    expectRateLimited(await human(server, { "x-forwarded-for": "198.18.0.99, 203.0.113.50" }))
    expectRateLimited(await human(server, { "x-forwarded-for": "203.0.113.50" }))
    expectRateLimited(await human(server, { forwarded: "for=198.18.0.100, for=203.0.113.50" }))
  })

  it("with only 127.0.0.1 trusted, a chain's right-most entry is the client even if it is a private address", async () => {
    for (let i = 0; i < LIMIT; i++) {
      expect((await human(server, { "x-forwarded-for": "198.51.100.9, 10.9.9.9" })).status).toBe(200)
    }
    expectRateLimited(await human(server, { "x-forwarded-for": "10.9.9.9" }))
    expect((await human(server, { "x-forwarded-for": "198.51.100.9" })).status).toBe(200)
  })

  it("throttles one client's failed authentications without throttling another client's", async () => {
    const a = { "x-forwarded-for": "203.0.113.20" }
    const b = { "x-forwarded-for": "203.0.113.21" }
    for (let i = 0; i < LIMIT; i++) {
      expectProblem(await request(server, "GET", machinePath, { bearer: guess, headers: a }), 401, "unauthorized")
    }
    expectRateLimited(await request(server, "GET", machinePath, { bearer: guess, headers: a }))
    // Another client behind the same proxy still gets its ordinary 401, not 429.
    for (let i = 0; i < LIMIT; i++) {
      expectProblem(await request(server, "GET", machinePath, { bearer: guess, headers: b }), 401, "unauthorized")
    }
    // And the proxy's own address was never charged for them.
    expectProblem(await request(server, "GET", machinePath, { bearer: guess }), 401, "unauthorized")
  })

  it("never refuses a valid key from a client whose failures are throttled", async () => {
    const c = { "x-forwarded-for": "203.0.113.22" }
    for (let i = 0; i < LIMIT; i++) {
      expectProblem(await request(server, "GET", machinePath, { bearer: guess, headers: c }), 401, "unauthorized")
    }
    expectRateLimited(await request(server, "GET", machinePath, { bearer: guess, headers: c }))
    const valid = await request(server, "GET", machinePath, { bearer: api_key, headers: c })
    expect(valid.status, valid.text).toBe(200)
    expect(valid.body.schema).toBe("pv.machine-trust.v1")
    // The failures stay throttled.
    expectRateLimited(await request(server, "GET", machinePath, { bearer: guess, headers: c }))
  })
})

describe(`client address through a chain of trusted proxies (${kind})`, () => {
  let server: TestServer
  beforeAll(async () => {
    server = await setup({ config: { trustedProxies: ["127.0.0.1/32", "10.0.0.0/8"], humanRateLimitPerMinute: LIMIT } })
  })
  afterAll(() => server?.close())

  it("skips trusted proxies from the right: 'X-Forwarded-For: 198.51.100.7, 10.1.2.3' is client 198.51.100.7", async () => {
    await exhaustHuman(server, { "x-forwarded-for": "198.51.100.7, 10.1.2.3" })
    // The same client seen directly by the edge proxy.
    expectRateLimited(await human(server, { "x-forwarded-for": "198.51.100.7" }))
    // Another client through the same inner proxy is not limited: the key is not 10.1.2.3.
    expect((await human(server, { "x-forwarded-for": "198.51.100.8, 10.1.2.3" })).status).toBe(200)
  })

  it("does the same for Forwarded with several elements", async () => {
    await exhaustHuman(server, { forwarded: "for=198.51.100.17, for=10.4.5.6" })
    expectRateLimited(await human(server, { "x-forwarded-for": "198.51.100.17" }))
    expect((await human(server, { forwarded: "for=198.51.100.18, for=10.4.5.6" })).status).toBe(200)
  })
})

describe(`forwarding headers without trusted proxies are ignored (${kind})`, () => {
  let server: TestServer
  let api_key: string
  beforeAll(async () => {
    server = await setup({ config: { humanRateLimitPerMinute: LIMIT, authFailureLimitPerMinute: LIMIT } })
    api_key = (await createKey(server, ["trust:read"])).api_key
  })
  afterAll(() => server?.close())

  it("counts every request against the socket peer, so spoofed addresses buy no fresh budget", async () => {
    for (let i = 0; i < LIMIT; i++) {
      const ok = await human(server, { "x-forwarded-for": `203.0.113.${100 + i}` })
      expect(ok.status, ok.text).toBe(200)
    }
    expectRateLimited(await human(server, { "x-forwarded-for": "203.0.113.200" }))
    expectRateLimited(await human(server, { forwarded: "for=203.0.113.201" }))
    expectRateLimited(await human(server))
  })

  it("throttles failed authentications from the peer whatever X-Forwarded-For says, but never a valid key", async () => {
    for (let i = 0; i < LIMIT; i++) {
      const reply = await request(server, "GET", machinePath, { bearer: guess, headers: { "x-forwarded-for": `198.18.1.${i}` } })
      expectProblem(reply, 401, "unauthorized")
    }
    expectRateLimited(await request(server, "GET", machinePath, { bearer: guess, headers: { "x-forwarded-for": "198.18.1.99" } }))
    expectRateLimited(await request(server, "GET", machinePath, { bearer: guess }))
    // Throttle the failures, not the address's valid traffic: the valid key and the operator token still work.
    const valid = await request(server, "GET", machinePath, { bearer: api_key })
    expect(valid.status, valid.text).toBe(200)
    const operator = await request(server, "GET", "/api/v1/api-keys", { bearer: server.operatorToken })
    expect(operator.status, operator.text).toBe(200)
    // A wrong operator token is a failure like any other.
    expectRateLimited(await request(server, "GET", "/api/v1/api-keys", { bearer: "wrong-operator-token-0123456789abcdef" }))
  })
})
