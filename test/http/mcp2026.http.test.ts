import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, type Reply, request } from "../support/http.js"
import { DocumentedToolScopes } from "../support/toolScopes.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * MCP revision 2026-07-28 on /api/v1/mcp (docs/API.md, "MCP"): raw HTTP for every request-metadata rule,
 * each with the shapes of the revision's own examples, then the official SDK client that speaks the
 * revision (@modelcontextprotocol/client) and the dual-era probe.
 */

const Modern = "2026-07-28"
const Served = [Modern, "2025-11-25", "2025-06-18", "2025-03-26"]
const AllScopes = ["trust:read", "receipt:read", "receipt:write", "mcp:call", "actionability:read", "subscription:write"] as const
const ToolNames = Object.keys(DocumentedToolScopes)

const first = "DET-V1-MCPM-0001"

let server: TestServer
let fullKey: string
let noTrustKey: string
let noMcpKey: string
let validUntilMs: number
const clients: Array<{ close: () => Promise<void> }> = []

const clientMeta = {
  "io.modelcontextprotocol/protocolVersion": Modern,
  "io.modelcontextprotocol/clientInfo": { name: "ExampleClient", version: "1.0.0" },
  "io.modelcontextprotocol/clientCapabilities": {}
}

/** A request as the revision's examples write it: the params with the per-request `_meta`. */
const modernRpc = (id: unknown, method: string, params: Record<string, unknown> = {}, meta: Record<string, unknown> = clientMeta) =>
  ({ jsonrpc: "2.0", id, method, params: { _meta: meta, ...params } })

/** The headers a conforming client sends for `body` (MCP-Protocol-Version, Mcp-Method, Mcp-Name). */
const modernHeaders = (method: string, name?: string): Record<string, string> => ({
  "mcp-protocol-version": Modern,
  "mcp-method": method,
  ...(name === undefined ? {} : { "mcp-name": name })
})

/** `key` null sends no Authorization header. */
const post = (body: unknown, headers: Record<string, string | undefined> = {}, key: string | null = fullKey): Promise<Reply> => {
  const sent: Record<string, string> = { "content-type": "application/json", accept: "application/json, text/event-stream" }
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) delete sent[name]
    else sent[name] = value
  }
  return request(server, "POST", "/api/v1/mcp", {
    ...(key === null ? {} : { bearer: key }),
    rawBody: typeof body === "string" ? body : JSON.stringify(body),
    headers: sent
  })
}

/** A conforming 2026-07-28 request: body and headers agree. */
const call = (id: unknown, method: string, params: Record<string, unknown> = {}, key?: string) =>
  post(modernRpc(id, method, params), modernHeaders(method, typeof params.name === "string" ? params.name : undefined), key ?? fullKey)

const expectJsonRpcError = (reply: Reply, status: number, id: unknown, code: number) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.headers.get("content-type")).toMatch(/^application\/json/)
  expect(reply.body).toMatchObject({ jsonrpc: "2.0", id, error: { code, message: expect.any(String) } })
  return reply.body.error as { code: number; message: string; data?: any }
}

const serverInfoMeta = { "io.modelcontextprotocol/serverInfo": { name: "pv-trust", title: expect.any(String), version: expect.any(String) } }

beforeAll(async () => {
  server = await startTestServer()
  const asOf = Date.now() - DAY_MS
  const body = determinationBody(asOf) as { valid_until: string }
  validUntilMs = Date.parse(body.valid_until)
  expect((await putDetermination(server, first, body)).status).toBe(201)
  fullKey = (await createKey(server, AllScopes)).api_key
  noTrustKey = (await createKey(server, AllScopes.filter((s) => s !== "trust:read"))).api_key
  noMcpKey = (await createKey(server, AllScopes.filter((s) => s !== "mcp:call"))).api_key
})

afterAll(async () => {
  for (const client of clients) await client.close().catch(() => undefined)
  await server?.close()
})

describe(`MCP 2026-07-28 over raw HTTP (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("server/discover (the revision's example request): versions, capabilities, identity, instructions, cache hints", async () => {
    const reply = await post({
      jsonrpc: "2.0",
      id: "discover-1",
      method: "server/discover",
      params: { _meta: clientMeta }
    }, modernHeaders("server/discover"))
    expect(reply.status, reply.text).toBe(200)
    expect(reply.headers.get("mcp-session-id")).toBeNull()
    expect(reply.body).toEqual({
      jsonrpc: "2.0",
      id: "discover-1",
      result: {
        resultType: "complete",
        supportedVersions: Served,
        capabilities: { tools: { listChanged: false } },
        _meta: serverInfoMeta,
        instructions: expect.stringContaining("NOT_AUTHORIZED"),
        ttlMs: 3_600_000,
        cacheScope: "public"
      }
    })
    expect(reply.body.result.instructions).toMatch(/isError/)
  })

  it("dual-era probe, raw: server/discover is modern evidence, -32022 names the versions to retry with, initialize still serves a client that falls back", async () => {
    // 1. The probe: a DiscoverResult that lists 2026-07-28, so a dual-era client stays modern.
    const probe = await call("server-discover-probe-1", "server/discover")
    expect(probe.status).toBe(200)
    expect(probe.body.result.supportedVersions).toContain(Modern)
    // 2. A client that probed with a revision this server does not know gets a recognized modern error, not a legacy one.
    const future = { ...clientMeta, "io.modelcontextprotocol/protocolVersion": "2027-01-01" }
    const corrective = await post(modernRpc("server-discover-probe-2", "server/discover", {}, future),
      { ...modernHeaders("server/discover"), "mcp-protocol-version": "2027-01-01" })
    const error = expectJsonRpcError(corrective, 400, "server-discover-probe-2", -32022)
    expect(error.data.supported).toContain(Modern)
    // 3. A client that falls back (or only speaks 2025) opens with initialize, with no header, as before.
    const init = await post({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "c", version: "1" } } }, {})
    expect(init.status).toBe(200)
    expect(init.body.result).toMatchObject({ protocolVersion: "2025-11-25", serverInfo: { name: "pv-trust" } })
    expect(init.body.result.resultType).toBeUndefined()
  })

  it("tools/list: resultType, the 8 tools in one fixed order with annotations and 2020-12 schemas, public cache hints", async () => {
    const one = await call(1, "tools/list")
    const two = await call(2, "tools/list", { cursor: "ignored" })
    expect(one.status).toBe(200)
    expect(one.body.result).toMatchObject({ resultType: "complete", ttlMs: 3_600_000, cacheScope: "public", _meta: serverInfoMeta })
    const tools = one.body.result.tools as Array<Record<string, any>>
    expect(tools.map((t) => t.name)).toEqual(two.body.result.tools.map((t: any) => t.name))
    expect(JSON.stringify(tools)).toBe(JSON.stringify(two.body.result.tools))
    expect([...tools.map((t) => t.name)].sort()).toEqual([...ToolNames].sort())
    for (const tool of tools) {
      expect(tool.inputSchema.type, tool.name).toBe("object")
      expect(tool.outputSchema.$schema, tool.name).toBe("https://json-schema.org/draft/2020-12/schema")
      for (const hint of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]) {
        expect(tool.annotations[hint], `${tool.name} ${hint}`).toBeTypeOf("boolean")
      }
    }
  })

  it("tools/call (the revision's example shape): structuredContent mirrored as text, resultType, a private ttlMs up to the freshness boundary", async () => {
    const before = Date.now()
    const reply = await call(2, "tools/call", { name: "resolve_trust", arguments: { public_id: first } })
    expect(reply.status, reply.text).toBe(200)
    const result = reply.body.result
    expect(result).toMatchObject({ resultType: "complete", cacheScope: "private", _meta: serverInfoMeta })
    expect(result.isError).toBeUndefined()
    expect(result.content).toEqual([{ type: "text", text: expect.any(String) }])
    expect(JSON.parse(result.content[0].text)).toEqual(result.structuredContent)
    expect(result.structuredContent.schema).toBe("pv.machine-trust.v1")
    // as_of a day ago and valid_until ahead: CURRENT until the APPROACHING_STALE boundary, which is before valid_until.
    expect(result.structuredContent.freshness.state).toBe("CURRENT")
    expect(Number.isInteger(result.ttlMs)).toBe(true)
    expect(result.ttlMs).toBeGreaterThan(0)
    expect(result.ttlMs).toBeLessThanOrEqual(validUntilMs - before)
    const lifecycle = (await call(3, "tools/call", { name: "resolve_lifecycle", arguments: { public_id: first } })).body.result
    expect(lifecycle).toMatchObject({ resultType: "complete", cacheScope: "private", structuredContent: { public_id: first } })
    expect(Math.abs(lifecycle.ttlMs - result.ttlMs)).toBeLessThan(60_000)
    // A result without a trust document's freshness carries no hint.
    const compared = (await call(4, "tools/call", { name: "compare_current", arguments: { public_id: first, trust_state_digest: result.structuredContent.trust_state_digest } })).body.result
    expect(compared.structuredContent.changed).toBe(false)
    expect(compared.ttlMs).toBeUndefined()
  })

  it("a trust document built by the call and then held in the cache answers the same result, in both eras, until the determination changes", async () => {
    const id = "DET-V1-MCPM-HELD"
    const asOf = Date.now() - DAY_MS
    expect((await putDetermination(server, id, determinationBody(asOf))).status).toBe(201)
    const modern = async (n: number) => {
      const reply = await call(n, "tools/call", { name: "resolve_trust", arguments: { public_id: id } })
      expect(reply.status, reply.text).toBe(200)
      const { ttlMs, ...rest } = reply.body.result
      return { rest, ttlMs: ttlMs as number, id: reply.body.id }
    }
    const legacy = async (n: number) => {
      const reply = await post({ jsonrpc: "2.0", id: n, method: "tools/call", params: { name: "resolve_trust", arguments: { public_id: id } } }, { "mcp-protocol-version": "2025-06-18" })
      expect(reply.status, reply.text).toBe(200)
      return reply.body
    }
    // The first call builds the document (the tool runs); the next ones find it held.
    const built = await modern(1)
    const held = await modern(2)
    expect(held.rest).toEqual(built.rest)
    expect([built.id, held.id]).toEqual([1, 2])
    expect(Math.abs(held.ttlMs - built.ttlMs)).toBeLessThan(10_000)
    const legacyHeld = await legacy(3)
    expect(legacyHeld).toEqual({ jsonrpc: "2.0", id: 3, result: { content: built.rest.content, structuredContent: built.rest.structuredContent } })
    // A change evicts the held document: the next call answers the new one, and so does the one after it.
    expect((await putDetermination(server, id, determinationBody(asOf, { tier: "T3" } as never))).status).toBe(200)
    const changed = await modern(4)
    expect(changed.rest.structuredContent.trust_state_digest).not.toBe(built.rest.structuredContent.trust_state_digest)
    expect((await modern(5)).rest).toEqual(changed.rest)
    expect((await legacy(6)).result.structuredContent).toEqual(changed.rest.structuredContent)
  })

  it("reports bad tool input as an isError result (the revision's tool execution error) with the problem object as text", async () => {
    const reply = await call(4, "tools/call", { name: "resolve_trust", arguments: { public_id: 42, extra: true } })
    expect(reply.status).toBe(200)
    expect(reply.body.result).toMatchObject({ resultType: "complete", isError: true, content: [{ type: "text" }] })
    expect(reply.body.result.structuredContent).toBeUndefined()
    const problem = JSON.parse(reply.body.result.content[0].text)
    expect(problem).toMatchObject({ code: "validation-failed", status: 422 })
    expect(problem.errors.map((e: { pointer: string }) => e.pointer)).toEqual(expect.arrayContaining(["/public_id"]))

    const missing = await call(5, "tools/call", { name: "resolve_trust", arguments: { public_id: "DET-V1-NOPE-0000" } })
    expect(missing.body.result).toMatchObject({ resultType: "complete", isError: true })
    expect(JSON.parse(missing.body.result.content[0].text)).toMatchObject({ code: "determination-not-found", status: 404 })

    const unscoped = await call(6, "tools/call", { name: "resolve_trust", arguments: { public_id: first } }, noTrustKey)
    expect(unscoped.body.result).toMatchObject({ isError: true })
    expect(JSON.parse(unscoped.body.result.content[0].text)).toMatchObject({ code: "insufficient-scope", status: 403 })
  })

  it("answers an unknown tool and params outside CallToolRequest with -32602 (a protocol error), HTTP 200", async () => {
    const unknown = expectJsonRpcError(await call(3, "tools/call", { name: "invalid_tool_name" }), 200, 3, -32602)
    expect(unknown.message).toMatch(/^Unknown tool: invalid_tool_name/)
    expectJsonRpcError(await call(4, "tools/call", { arguments: {} }), 200, 4, -32602)
  })

  it("-32022 for a protocol version it does not serve (the revision's example), listing the served ones, HTTP 400", async () => {
    const meta = { ...clientMeta, "io.modelcontextprotocol/protocolVersion": "1900-01-01" }
    const reply = await post(modernRpc(1, "tools/list", {}, meta), { ...modernHeaders("tools/list"), "mcp-protocol-version": "1900-01-01" })
    const error = expectJsonRpcError(reply, 400, 1, -32022)
    expect(error.data).toEqual({ supported: Served, requested: "1900-01-01" })
    // The header alone on a 2025-shaped request, and a notification: the same error (no id to echo there).
    expect(expectJsonRpcError(await post({ jsonrpc: "2.0", id: 2, method: "ping" }, { "mcp-protocol-version": "2099-01-01" }), 400, 2, -32022).data)
      .toEqual({ supported: Served, requested: "2099-01-01" })
    expectJsonRpcError(await post({ jsonrpc: "2.0", method: "notifications/initialized" }, { "mcp-protocol-version": "2099-01-01" }), 400, null, -32022)
  })

  it("-32020 when MCP-Protocol-Version and the body's _meta disagree, or the header is missing, HTTP 400", async () => {
    const legacyHeader = await post(modernRpc(1, "tools/list"), { ...modernHeaders("tools/list"), "mcp-protocol-version": "2025-11-25" })
    expect(expectJsonRpcError(legacyHeader, 400, 1, -32020).message)
      .toBe("Header mismatch: MCP-Protocol-Version header value '2025-11-25' does not match body value '2026-07-28'.")
    expectJsonRpcError(await post(modernRpc(2, "tools/list"), { "mcp-method": "tools/list" }), 400, 2, -32020)
  })

  it("-32020 when Mcp-Method is missing or names another method, HTTP 400", async () => {
    expectJsonRpcError(await post(modernRpc(1, "tools/list"), { "mcp-protocol-version": Modern }), 400, 1, -32020)
    const other = await post(modernRpc(2, "tools/list"), modernHeaders("server/discover"))
    expect(expectJsonRpcError(other, 400, 2, -32020).message).toMatch(/Mcp-Method header value 'server\/discover' does not match body value 'tools\/list'/)
    // Values are case-sensitive, names are not.
    expectJsonRpcError(await post(modernRpc(3, "tools/list"), modernHeaders("Tools/List")), 400, 3, -32020)
    const shouted = await post(modernRpc(4, "tools/list"), { "MCP-PROTOCOL-VERSION": Modern, "MCP-METHOD": "tools/list" })
    expect(shouted.status).toBe(200)
  })

  it("-32020 when Mcp-Name is missing, does not match (the revision's example), or is a broken Base64 sentinel; a valid sentinel is decoded", async () => {
    const params = { name: "bar", arguments: {} }
    const mismatch = await post(modernRpc(1, "tools/call", params), modernHeaders("tools/call", "foo"))
    expect(mismatch.status).toBe(400)
    expect(mismatch.body).toEqual({
      jsonrpc: "2.0",
      id: 1,
      error: { code: -32020, message: "Header mismatch: Mcp-Name header value 'foo' does not match body value 'bar'.", data: { header: "Mcp-Name" } }
    })
    expectJsonRpcError(await post(modernRpc(2, "tools/call", params), modernHeaders("tools/call")), 400, 2, -32020)
    expectJsonRpcError(await post(modernRpc(3, "tools/call", params), modernHeaders("tools/call", "=?base64?!!!?=")), 400, 3, -32020)
    const encoded = `=?base64?${Buffer.from("resolve_trust").toString("base64")}?=`
    const decoded = await post(modernRpc(4, "tools/call", { name: "resolve_trust", arguments: { public_id: first } }), modernHeaders("tools/call", encoded))
    expect(decoded.status, decoded.text).toBe(200)
    expect(decoded.body.result.structuredContent.schema).toBe("pv.machine-trust.v1")
  })

  it("-32602 (HTTP 400) for missing or malformed per-request metadata", async () => {
    const { "io.modelcontextprotocol/clientCapabilities": _, ...noCapabilities } = clientMeta
    const missing = expectJsonRpcError(await post(modernRpc(1, "tools/list", {}, noCapabilities), modernHeaders("tools/list")), 400, 1, -32602)
    expect(missing.data.pointer).toBe("/params/_meta/io.modelcontextprotocol~1clientCapabilities")
    expectJsonRpcError(await post(modernRpc(2, "tools/list", {}, { ...clientMeta, "io.modelcontextprotocol/protocolVersion": 2026 }), modernHeaders("tools/list")), 400, 2, -32602)
    expectJsonRpcError(await post(modernRpc(3, "tools/list", {}, { ...clientMeta, "io.modelcontextprotocol/clientInfo": "me" }), modernHeaders("tools/list")), 400, 3, -32602)
    // The header names the revision, but the body carries no _meta at all.
    expectJsonRpcError(await post({ jsonrpc: "2.0", id: 4, method: "tools/list" }, modernHeaders("tools/list")), 400, 4, -32602)
  })

  it("answers a method the revision does not define here with -32601 and HTTP 404: initialize, ping, subscriptions/listen", async () => {
    for (const method of ["initialize", "ping", "resources/list", "logging/setLevel"]) {
      expectJsonRpcError(await call(1, method), 404, 1, -32601)
    }
    // The revision's example listen request: not offered by this tools-only server (docs/API.md says why).
    const listen = await post(modernRpc("listen-1", "subscriptions/listen", {
      notifications: { toolsListChanged: true, resourceSubscriptions: ["file:///project/config.json"] }
    }), modernHeaders("subscriptions/listen"))
    expectJsonRpcError(listen, 404, "listen-1", -32601)
    // A 2025 initialize under a 2026-07-28 header is a contradiction, not a handshake.
    const init = await post({ jsonrpc: "2.0", id: 9, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {} } }, modernHeaders("initialize"))
    expectJsonRpcError(init, 400, 9, -32020)
  })

  it("ignores Mcp-Session-Id and Last-Event-ID, and mints none", async () => {
    const reply = await post(modernRpc(1, "tools/list"), { ...modernHeaders("tools/list"), "mcp-session-id": "stale-session", "last-event-id": "7" })
    expect(reply.status).toBe(200)
    expect(reply.headers.get("mcp-session-id")).toBeNull()
    const legacy = await post({ jsonrpc: "2.0", id: 2, method: "ping" }, { "mcp-session-id": "stale-session" })
    expect(legacy.body).toEqual({ jsonrpc: "2.0", id: 2, result: {} })
    expect(legacy.headers.get("mcp-session-id")).toBeNull()
  })

  it("answers GET and DELETE with 405, session header or not", async () => {
    for (const method of ["GET", "DELETE"]) {
      const reply = await request(server, method, "/api/v1/mcp", {
        bearer: fullKey,
        headers: { accept: "text/event-stream", "mcp-protocol-version": Modern, "mcp-session-id": "stale-session" }
      })
      expect(reply.status, method).toBe(405)
      expect(reply.headers.get("allow")).toBe("POST")
    }
  })

  it("accepts a notification with 202 and refuses a posted response with -32600 (nothing to answer in this revision)", async () => {
    const notification = await post({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } }, modernHeaders("notifications/cancelled"))
    expect(notification.status).toBe(202)
    expect(notification.text).toBe("")
    expectJsonRpcError(await post({ jsonrpc: "2.0", id: 1, result: {} }, { "mcp-protocol-version": Modern }), 400, null, -32600)
  })

  it("applies authentication, the mcp:call scope and the Origin rule to 2026-07-28 requests as to the others", async () => {
    expect((await call(1, "server/discover", {}, "pv_nope")).status).toBe(401)
    const unauthenticated = await post(modernRpc(1, "server/discover"), modernHeaders("server/discover"), null)
    expect(unauthenticated.status).toBe(401)
    const unscoped = await call(2, "server/discover", {}, noMcpKey)
    expect(unscoped.status).toBe(403)
    expect(unscoped.body.code).toBe("insufficient-scope")
    const foreign = await post(modernRpc(3, "tools/call", { name: "resolve_trust", arguments: { public_id: first } }),
      { ...modernHeaders("tools/call", "resolve_trust"), origin: "https://evil.example" })
    expect(foreign.status).toBe(403)
    expect(foreign.body.code).toBe("origin-not-allowed")
  })
})

describe(`JSON-RPC batches and repeated member names on /api/v1/mcp (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  const batch = [{ jsonrpc: "2.0", id: 1, method: "ping" }, { jsonrpc: "2.0", id: 2, method: "tools/list" }]

  it("serves a batch for 2025-03-26, and for a client that names no version (treated as 2025-03-26)", async () => {
    for (const headers of [{ "mcp-protocol-version": "2025-03-26" }, {}]) {
      const reply = await post(batch, headers)
      expect(reply.status, reply.text).toBe(200)
      expect(reply.body.map((r: { id: number }) => r.id)).toEqual([1, 2])
    }
  })

  it("refuses a batch under any other revision with -32600 and HTTP 400, running none of it", async () => {
    for (const version of ["2025-06-18", "2025-11-25", Modern]) {
      const error = expectJsonRpcError(await post(batch, { "mcp-protocol-version": version }), 400, null, -32600)
      expect(error.message, version).toContain("2025-03-26")
    }
    // An element with 2026-07-28 metadata makes the batch a 2026-07-28 one, whatever the header says.
    expectJsonRpcError(await post([modernRpc(1, "tools/list")]), 400, null, -32600)
  })

  it("refuses a repeated member name at any depth with -32700, naming its JSON pointer", async () => {
    const cases: Array<[string, string]> = [
      ['{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', "/id"],
      ['{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"resolve_trust","name":"compare_current"}}', "/params/name"],
      [`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"resolve_trust","arguments":{"public_id":"${first}","public_\\u0069d":"x"}}}`, "/params/arguments/public_id"],
      ['[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping","method":"tools/list"}]', "/1/method"]
    ]
    for (const [body, pointer] of cases) {
      for (const headers of [{}, modernHeaders("tools/call", "resolve_trust")]) {
        const error = expectJsonRpcError(await post(body, headers), 400, null, -32700)
        expect(error.data, body).toEqual({ pointer })
        expect(error.message).toContain(JSON.stringify(pointer))
      }
    }
  })
})

describe(`MCP 2026-07-28 with the official SDK client @modelcontextprotocol/client (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  const endpoint = () => new URL(`${server.baseUrl}/api/v1/mcp`)
  const auth = () => ({ requestInit: { headers: { Authorization: `Bearer ${fullKey}` } } })

  /** Every request the SDK sends, method and protocol-version header. */
  const recording = (log: Array<{ method: string; version: string | null; name: string | null }>) =>
    async (input: string | URL | Request, init?: RequestInit) => {
      const headers = new Headers(init?.headers)
      if (init?.method === "POST" && typeof init.body === "string") {
        const body = JSON.parse(init.body) as { method?: string }
        log.push({ method: body.method ?? "(response)", version: headers.get("mcp-protocol-version"), name: headers.get("mcp-name") })
      }
      return fetch(input, init)
    }

  const connect = async (mode: "auto" | { pin: string }, fetchImpl?: typeof fetch) => {
    const client = new Client({ name: "pv-mcp-2026-test", version: "1.0.0" }, { versionNegotiation: { mode } })
    const transport = new StreamableHTTPClientTransport(endpoint(), { ...auth(), ...(fetchImpl === undefined ? {} : { fetch: fetchImpl }) })
    await client.connect(transport)
    clients.push(client)
    return client
  }

  it("pinned to 2026-07-28: discovers, lists and calls tools, statelessly", async () => {
    const log: Array<{ method: string; version: string | null; name: string | null }> = []
    const client = await connect({ pin: Modern }, recording(log) as typeof fetch)
    expect(client.getProtocolEra()).toBe("modern")
    expect(client.getNegotiatedProtocolVersion()).toBe(Modern)
    expect(client.getServerVersion()?.name).toBe("pv-trust")
    expect(client.getInstructions()).toContain("NOT_AUTHORIZED")
    expect(client.getDiscoverResult()?.supportedVersions).toEqual(Served)
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual([...ToolNames].sort())
    const result = await client.callTool({ name: "resolve_trust", arguments: { public_id: first } })
    expect(result.isError ?? false).toBe(false)
    expect((result.structuredContent as { schema: string }).schema).toBe("pv.machine-trust.v1")
    expect(log.map((entry) => entry.method)).toEqual(["server/discover", "tools/list", "tools/call"])
    expect(log.every((entry) => entry.version === Modern)).toBe(true)
    expect(log[2]!.name).toBe("resolve_trust")
  })

  it("shows bad input to the model as an isError result, and an unknown tool as a -32602 protocol error", async () => {
    const client = await connect({ pin: Modern })
    const bad = await client.callTool({ name: "resolve_trust", arguments: { public_id: 42 } })
    expect(bad.isError).toBe(true)
    expect(JSON.parse((bad.content as Array<{ text: string }>)[0]!.text)).toMatchObject({ code: "validation-failed" })
    await expect(client.callTool({ name: "invalid_tool_name", arguments: {} })).rejects.toSatisfy((error: unknown) =>
      error instanceof ProtocolError && error.code === -32602)
  })

  it("dual-era probe against this server: server/discover first, and it stays on 2026-07-28", async () => {
    const log: Array<{ method: string; version: string | null; name: string | null }> = []
    const client = await connect("auto", recording(log) as typeof fetch)
    expect(client.getProtocolEra()).toBe("modern")
    expect(log[0]).toMatchObject({ method: "server/discover", version: Modern })
    expect(log.some((entry) => entry.method === "initialize")).toBe(false)
    const result = await client.callTool({ name: "resolve_lifecycle", arguments: { public_id: first } })
    expect((result.structuredContent as { public_id: string }).public_id).toBe(first)
  })

  it("dual-era probe against a 2025-only deployment: the legacy error makes the SDK fall back to initialize, which this server serves", async () => {
    // A 2025-only server (the SDK 1.x shape) answers server/discover 400 with -32000 "Server not initialized".
    const log: Array<{ method: string; version: string | null; name: string | null }> = []
    const record = recording(log)
    const legacyOnly = (async (input: string | URL | Request, init?: RequestInit) => {
      if (typeof init?.body === "string" && (JSON.parse(init.body) as { method?: string }).method === "server/discover") {
        log.push({ method: "server/discover", version: new Headers(init.headers).get("mcp-protocol-version"), name: null })
        return new Response(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: Server not initialized" }, id: null }), {
          status: 400,
          headers: { "content-type": "application/json" }
        })
      }
      return record(input, init)
    }) as typeof fetch
    const client = await connect("auto", legacyOnly)
    expect(client.getProtocolEra()).toBe("legacy")
    expect(client.getNegotiatedProtocolVersion()).toBe("2025-11-25")
    expect(log.map((entry) => entry.method).slice(0, 2)).toEqual(["server/discover", "initialize"])
    const result = await client.callTool({ name: "resolve_trust", arguments: { public_id: first } })
    expect((result.structuredContent as { schema: string }).schema).toBe("pv.machine-trust.v1")
  })

  it("a 2025 client (SDK 1.x) on the same endpoint is served as before", async () => {
    const client = new LegacyClient({ name: "pv-mcp-legacy", version: "1.0.0" })
    await client.connect(new LegacyTransport(endpoint(), auth()))
    clients.push(client)
    expect((await client.listTools()).tools).toHaveLength(ToolNames.length)
    const result = await client.callTool({ name: "resolve_trust", arguments: { public_id: first } })
    expect((result.structuredContent as { schema: string }).schema).toBe("pv.machine-trust.v1")
  })
})
