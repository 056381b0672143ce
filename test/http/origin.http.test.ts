import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { asOperator, createKey, expectProblem, putDetermination, type Reply, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * docs/API.md §3.6, the Origin rule: a request whose `Origin` is not in PV_ALLOWED_ORIGINS → 403 `origin-not-allowed` on
 * /mcp and every credentialed endpoint (MCP's DNS-rebinding rule), and nothing happens; requests without
 * `Origin` are unaffected; /human, /log/*, /events/keys, docs and health stay open to browsers (CORS GET).
 */

const kind = testDatabaseKind()
const id = "DET-V1-ORIGIN-0001"
const evil = "https://evil.example"
const app = "https://app.example"
const mcpHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }

const receiptBody = (principal: string) => ({
  tenant_id: "tenant-a",
  organization: "Acme Procurement",
  principal,
  subject_public_id: id,
  purpose_id: "supplier-onboarding",
  requested_action: "approve",
  claim_scope: ["identity"]
})

const rpc = (rpcId: number, method: string, params?: unknown) =>
  JSON.stringify({ jsonrpc: "2.0", id: rpcId, method, ...(params === undefined ? {} : { params }) })

const expectOriginRefused = (reply: Reply) => expectProblem(reply, 403, "origin-not-allowed")

const listOf = (value: string | null) => (value ?? "").split(",").map((s) => s.trim().toLowerCase()).filter((s) => s.length > 0)

const setup = async (config: Parameters<typeof startTestServer>[0]) => {
  const server = await startTestServer(config)
  const put = await putDetermination(server, id, determinationBody(Date.now() - DAY_MS))
  expect(put.status, put.text).toBe(201)
  const key = await createKey(server, ["trust:read", "mcp:call", "receipt:write", "receipt:read"])
  return { server, key: key.api_key }
}

describe(`origins with PV_ALLOWED_ORIGINS empty (${kind})`, () => {
  let server: TestServer
  let key: string
  beforeAll(async () => {
    ({ server, key } = await setup({}))
  })
  afterAll(() => server?.close())

  it("refuses a foreign Origin on /mcp with 403 origin-not-allowed, and runs no tool", async () => {
    const principal = "agent:origin-mcp"
    const call = rpc(1, "tools/call", { name: "create_reliance_receipt", arguments: receiptBody(principal) })
    const refused = await request(server, "POST", "/api/v1/mcp", { bearer: key, rawBody: call, headers: { ...mcpHeaders, origin: evil } })
    expectOriginRefused(refused)
    expectOriginRefused(await request(server, "POST", "/api/v1/mcp", { bearer: key, rawBody: rpc(2, "ping"), headers: { ...mcpHeaders, origin: evil } }))
    // Nothing was stored: the same receipt over REST is new.
    const created = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody(principal) })
    expect(created.status, created.text).toBe(201)
    // Without Origin, /mcp works.
    const ping = await request(server, "POST", "/api/v1/mcp", { bearer: key, rawBody: rpc(3, "ping"), headers: mcpHeaders })
    expect(ping.status, ping.text).toBe(200)
    expect(ping.body).toEqual({ jsonrpc: "2.0", id: 3, result: {} })
  })

  it("refuses a foreign Origin on the machine endpoint, the events feed and receipts", async () => {
    const headers = { origin: evil }
    expectOriginRefused(await request(server, "GET", `/api/v1/trust/${id}/machine`, { bearer: key, headers }))
    expectOriginRefused(await request(server, "GET", `/api/v1/events?public_id=${id}`, { bearer: key, headers }))
    const principal = "agent:origin-rest"
    expectOriginRefused(await request(server, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody(principal), headers }))
    // Nothing was stored: the same body without Origin creates the receipt (201, not a 200 replay).
    const created = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody(principal) })
    expect(created.status, created.text).toBe(201)
    expectOriginRefused(await request(server, "GET", `/api/v1/reliance-receipts/${created.body.receipt_id}`, { bearer: key, headers }))
    // The same requests without Origin work.
    expect((await request(server, "GET", `/api/v1/trust/${id}/machine`, { bearer: key })).status).toBe(200)
    expect((await request(server, "GET", `/api/v1/events?public_id=${id}`, { bearer: key })).status).toBe(200)
    expect((await request(server, "GET", `/api/v1/reliance-receipts/${created.body.receipt_id}`, { bearer: key })).status).toBe(200)
  })

  it("refuses a foreign Origin on operator endpoints, and creates or changes nothing", async () => {
    const headers = { origin: evil }
    const tenant = "tenant-origin"
    expectOriginRefused(await request(server, "POST", "/api/v1/api-keys", {
      ...asOperator(server), headers, body: { tenant_id: tenant, name: "from a browser", scopes: ["trust:read"] }
    }))
    expectOriginRefused(await request(server, "GET", `/api/v1/api-keys?tenant_id=${tenant}`, { ...asOperator(server), headers }))
    const before = (await request(server, "GET", `/api/v1/trust/${id}/human`)).body
    expectOriginRefused(await request(server, "PUT", `/api/v1/determinations/${id}`, {
      ...asOperator(server), headers, body: determinationBody(Date.now() - DAY_MS, { tier: "T4" })
    }))
    const list = await request(server, "GET", `/api/v1/api-keys?tenant_id=${tenant}`, asOperator(server))
    expect(list.status).toBe(200)
    expect(list.body.keys).toEqual([])
    expect((await request(server, "GET", `/api/v1/trust/${id}/human`)).body).toEqual(before)
    // Without Origin the operator works.
    const created = await request(server, "POST", "/api/v1/api-keys", {
      ...asOperator(server), body: { tenant_id: tenant, name: "from a script", scopes: ["trust:read"] }
    })
    expect(created.status, created.text).toBe(201)
  })

  it("treats Origin: null (sandboxed documents, file:) as a foreign origin", async () => {
    expectOriginRefused(await request(server, "GET", `/api/v1/trust/${id}/machine`, { bearer: key, headers: { origin: "null" } }))
    expectOriginRefused(await request(server, "POST", "/api/v1/mcp", { bearer: key, rawBody: rpc(4, "ping"), headers: { ...mcpHeaders, origin: "null" } }))
  })

  it("answers the open endpoints normally to any Origin, with Access-Control-Allow-Origin: *", async () => {
    for (const path of [`/api/v1/trust/${id}/human`, "/api/v1/events/keys", "/openapi.json", "/healthz", "/readyz"]) {
      const reply = await request(server, "GET", path, { headers: { origin: evil } })
      expect(reply.status, `${path}: ${reply.text.slice(0, 200)}`).toBe(200)
      expect(reply.headers.get("access-control-allow-origin"), path).toBe("*")
    }
    const human = await request(server, "GET", `/api/v1/trust/${id}/human`, { headers: { origin: evil } })
    expect(human.body.schema).toBe("pv.machine-trust.v1")
  })

  it("answers a CORS preflight for GET on /human", async () => {
    const reply = await request(server, "OPTIONS", `/api/v1/trust/${id}/human`, {
      headers: { origin: evil, "access-control-request-method": "GET" }
    })
    expect([200, 204], reply.text).toContain(reply.status)
    expect(reply.headers.get("access-control-allow-origin")).toBe("*")
    expect(listOf(reply.headers.get("access-control-allow-methods"))).toContain("get")
  })

  it("refuses a preflight for a credentialed endpoint from a foreign origin", async () => {
    const reply = await request(server, "OPTIONS", "/api/v1/mcp", {
      headers: { origin: evil, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" }
    })
    expectOriginRefused(reply)
    expect(reply.headers.get("access-control-allow-origin")).toBeNull()
  })
})

describe(`origins with PV_ALLOWED_ORIGINS=${app} (${kind})`, () => {
  let server: TestServer
  let key: string
  beforeAll(async () => {
    ({ server, key } = await setup({ config: { allowedOrigins: [app] } }))
  })
  afterAll(() => server?.close())

  const expectCorsFor = (reply: Reply, origin: string) => {
    expect(reply.headers.get("access-control-allow-origin")).toBe(origin)
    expect(listOf(reply.headers.get("vary"))).toContain("origin")
  }

  it("serves /mcp and /machine to the allowed origin, naming it in Access-Control-Allow-Origin with Vary: Origin", async () => {
    const ping = await request(server, "POST", "/api/v1/mcp", { bearer: key, rawBody: rpc(1, "ping"), headers: { ...mcpHeaders, origin: app } })
    expect(ping.status, ping.text).toBe(200)
    expect(ping.body).toEqual({ jsonrpc: "2.0", id: 1, result: {} })
    expectCorsFor(ping, app)
    const machine = await request(server, "GET", `/api/v1/trust/${id}/machine`, { bearer: key, headers: { origin: app } })
    expect(machine.status, machine.text).toBe(200)
    expect(machine.body.schema).toBe("pv.machine-trust.v1")
    expectCorsFor(machine, app)
  })

  it("still refuses any other origin, including near misses of the allowed one", async () => {
    for (const origin of [evil, "http://app.example", "https://app.example:8443", "https://app.example.evil.example", "https://sub.app.example"]) {
      const machine = await request(server, "GET", `/api/v1/trust/${id}/machine`, { bearer: key, headers: { origin } })
      expectOriginRefused(machine)
      expect(machine.headers.get("access-control-allow-origin"), origin).not.toBe(origin)
      expectOriginRefused(await request(server, "POST", "/api/v1/mcp", { bearer: key, rawBody: rpc(2, "ping"), headers: { ...mcpHeaders, origin } }))
    }
  })

  it("answers a preflight for POST /mcp from the allowed origin, allowing Authorization and Content-Type", async () => {
    const reply = await request(server, "OPTIONS", "/api/v1/mcp", {
      headers: { origin: app, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" }
    })
    expect(reply.status, reply.text).toBe(204)
    expectCorsFor(reply, app)
    expect(listOf(reply.headers.get("access-control-allow-methods"))).toContain("post")
    const allowedHeaders = listOf(reply.headers.get("access-control-allow-headers"))
    expect(allowedHeaders).toContain("authorization")
    expect(allowedHeaders).toContain("content-type")
  })

  it("refuses the same preflight from a disallowed origin with a 403 problem", async () => {
    const reply = await request(server, "OPTIONS", "/api/v1/mcp", {
      headers: { origin: evil, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" }
    })
    expectOriginRefused(reply)
    expect(reply.headers.get("access-control-allow-origin")).toBeNull()
  })

  it("keeps the open endpoints open to every origin", async () => {
    const reply = await request(server, "GET", `/api/v1/trust/${id}/human`, { headers: { origin: evil } })
    expect(reply.status).toBe(200)
    expect(reply.headers.get("access-control-allow-origin")).toBe("*")
  })
})
