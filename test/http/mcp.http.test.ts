import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { McpError } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { digestOf } from "../../src/domain/Canonical.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, type Reply, request } from "../support/http.js"
import { DocumentedToolScopes } from "../support/toolScopes.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * docs/API.md §12 end to end: the official MCP SDK client against the real server, plus raw HTTP
 * for what the SDK never sends (batches, parse errors, bare notifications, wrong headers).
 */

const AllScopes = ["trust:read", "receipt:read", "receipt:write", "mcp:call", "actionability:read", "subscription:write"] as const
const ToolScopes = DocumentedToolScopes
const ToolNames = Object.keys(ToolScopes).sort()

const first = "DET-V1-MCP-0001"
const second = "DET-V1-MCP-0002"
const other = "DET-V1-MCP-0003"

let server: TestServer
let asOf: number
let fullKey: string
let otherTenantKey: string
let noMcpKey: string
const withoutScope: Record<string, string> = {}
const clients: Array<Client> = []

const connect = async (key: string): Promise<Client> => {
  const client = new Client({ name: "pv-mcp-test", version: "1.0.0" })
  const transport = new StreamableHTTPClientTransport(new URL(`${server.baseUrl}/api/v1/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } }
  })
  await client.connect(transport)
  clients.push(client)
  return client
}

const receiptArguments = (overrides: Record<string, unknown> = {}) => ({
  tenant_id: "tenant-a",
  organization: "Acme Procurement",
  principal: "agent-7",
  subject_public_id: first,
  purpose_id: "supplier-onboarding",
  requested_action: "screen",
  claim_scope: ["identity"],
  ...overrides
})

const defaultHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }

/** A raw POST to the MCP endpoint: `body` is sent as JSON unless it is already a string. */
const post = (body: unknown, options: { key?: string; headers?: Record<string, string> } = {}): Promise<Reply> =>
  request(server, "POST", "/api/v1/mcp", {
    bearer: options.key ?? fullKey,
    rawBody: typeof body === "string" ? body : JSON.stringify(body),
    headers: { ...defaultHeaders, ...options.headers }
  })

const rpc = (id: unknown, method: string, params?: unknown) =>
  ({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) })

/** The JSON-RPC error an SDK call failed with. */
const rpcError = async (call: Promise<unknown>): Promise<McpError> => {
  try {
    await call
  } catch (error) {
    expect(error).toBeInstanceOf(McpError)
    return error as McpError
  }
  throw new Error("expected the call to fail")
}

const expectProblemData = (error: McpError, code: number, problem: string, status: number) => {
  expect(error.code, error.message).toBe(code)
  const data = error.data as Record<string, any>
  expect(data.type).toBe(`urn:pv:problem:${problem}`)
  expect(data.code).toBe(problem)
  expect(data.status).toBe(status)
  expect(data.title).toBeTypeOf("string")
  expect(data.detail).toBeTypeOf("string")
  return data
}

const expectHttpProblem = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.headers.get("content-type")).toMatch(/^application\/problem\+json/)
  expect(reply.body.code).toBe(code)
}

beforeAll(async () => {
  server = await startTestServer()
  asOf = Date.now() - DAY_MS
  fullKey = (await createKey(server, AllScopes)).api_key
  otherTenantKey = (await createKey(server, AllScopes, { tenant_id: "tenant-b" })).api_key
  noMcpKey = (await createKey(server, AllScopes.filter((s) => s !== "mcp:call"))).api_key
  for (const scope of new Set(Object.values(ToolScopes))) {
    withoutScope[scope] = (await createKey(server, AllScopes.filter((s) => s !== scope))).api_key
  }
  const subject = { subject_id: "sub_mcp", physical_subject_id: "phys_mcp", identity_state: "VERIFIED" }
  expect((await putDetermination(server, first, determinationBody(asOf, { subject }))).status).toBe(201)
  expect((await putDetermination(server, second, determinationBody(asOf, { subject, tier: "T3" }))).status).toBe(201)
  expect((await putDetermination(server, other, determinationBody(asOf))).status).toBe(201)
})

afterAll(async () => {
  for (const client of clients) await client.close().catch(() => undefined)
  await server?.close()
})

describe(`MCP with the official SDK client (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("initializes: negotiated version, tools capability, server info and the reliance instructions", async () => {
    const client = await connect(fullKey)
    expect(client.getServerCapabilities()?.tools).toBeDefined()
    expect(client.getServerVersion()?.name).toBe("pv-trust")
    const instructions = client.getInstructions() ?? ""
    expect(instructions).toContain("NOT_AUTHORIZED")
    expect(instructions).toMatch(/not permission to rely/)
  })

  it("lists exactly the 8 tools, each with title, description, object schemas and annotations", async () => {
    const client = await connect(fullKey)
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual(ToolNames)
    for (const tool of tools) {
      expect(tool.title, tool.name).toBeTypeOf("string")
      expect(tool.description!.length, tool.name).toBeGreaterThan(80)
      expect(tool.description, tool.name).toContain(ToolScopes[tool.name])
      expect(tool.inputSchema.type, tool.name).toBe("object")
      expect(tool.outputSchema?.type, tool.name).toBe("object")
      for (const hint of ["readOnlyHint", "idempotentHint", "destructiveHint", "openWorldHint"] as const) {
        expect(tool.annotations?.[hint], `${tool.name} ${hint}`).toBeTypeOf("boolean")
      }
    }
    const byName = new Map(tools.map((t) => [t.name, t]))
    expect(byName.get("resolve_trust")!.annotations!.readOnlyHint).toBe(true)
    expect(byName.get("create_reliance_receipt")!.annotations!.readOnlyHint).toBe(false)
    expect(byName.get("subscribe_trust_changes")!.annotations!.readOnlyHint).toBe(false)
  })

  it("describes every tool for an agent: what it returns, what to check before relying, and readable schemas", async () => {
    const client = await connect(fullKey)
    const { tools } = await client.listTools()
    const titles: Array<string> = []
    const collectTitles = (node: unknown): void => {
      if (typeof node !== "object" || node === null) return
      const title = (node as { title?: unknown }).title
      if (typeof title === "string") titles.push(title)
      Object.values(node).forEach(collectTitles)
    }
    for (const tool of tools) {
      expect(tool.description, tool.name).toMatch(/returns/i)
      expect(tool.description, tool.name).toMatch(/before relying|rely only|act only|not permission/i)
      for (const schema of [tool.inputSchema, tool.outputSchema!]) {
        expect(schema.title, tool.name).toMatch(new RegExp(`^${tool.title}: (arguments|result)$`))
        const members = Object.entries((schema.properties ?? {}) as Record<string, { title?: string; description?: string }>)
        const branches = ((schema as { anyOf?: Array<{ properties?: object }> }).anyOf ?? []).flatMap((b) => Object.entries(b.properties ?? {}))
        for (const [member, property] of [...members, ...branches] as Array<[string, { title?: string; description?: string }]>) {
          expect(property.title, `${tool.name}.${member}`).toBeTypeOf("string")
          expect(property.description?.length ?? 0, `${tool.name}.${member} has a description`).toBeGreaterThan(10)
        }
        collectTitles(schema)
      }
    }
    // Effect names refinements after their constraint; none of those may reach an agent as a title.
    expect(titles.filter((title) => /^[a-z][A-Za-z]*(\(.*\))?$/.test(title))).toEqual([])
  })

  it("calls every tool: each result is the REST twin's object, as structuredContent and as JSON text", async () => {
    const client = await connect(fullKey)
    await client.listTools() // the SDK validates structuredContent against outputSchema from here on
    const call = async (name: string, args: Record<string, unknown>) => {
      const result = await client.callTool({ name, arguments: args })
      expect(result.isError ?? false, name).toBe(false)
      const content = result.content as Array<{ type: string; text: string }>
      expect(content).toHaveLength(1)
      expect(content[0]!.type).toBe("text")
      expect(JSON.parse(content[0]!.text), name).toEqual(result.structuredContent)
      return result.structuredContent as Record<string, any>
    }

    const machine = await request(server, "GET", `/api/v1/trust/${first}/machine`, { bearer: fullKey })
    const trust = await call("resolve_trust", { public_id: first })
    expect(trust).toEqual(machine.body)
    expect(trust.authority.authority_state).toBe("NOT_AUTHORIZED")

    const bySubject = await call("resolve_subject", { subject_id: "sub_mcp" })
    expect(bySubject.subject).toEqual({ subject_id: "sub_mcp", physical_subject_id: "phys_mcp", identity_state: "VERIFIED" })
    // Each document with the public id it belongs to (an agent cannot tell them apart otherwise).
    expect(bySubject.determinations.map((d: any) => d.public_id)).toEqual([first, second].sort())
    expect(bySubject.determinations.map((d: any) => d.document.determination.tier)).toEqual(["T2", "T3"])
    expect(bySubject.determinations.find((d: any) => d.public_id === first).document).toEqual(machine.body)
    for (const { public_id, document } of bySubject.determinations) {
      expect(document).toEqual((await request(server, "GET", `/api/v1/trust/${public_id}/machine`, { bearer: fullKey })).body)
    }
    expect(await call("resolve_subject", { public_id: second })).toEqual(bySubject)

    const lifecycle = await call("resolve_lifecycle", { public_id: first })
    expect(lifecycle).toEqual({
      public_id: first,
      determination_id: trust.determination.determination_id,
      trust_state_digest: trust.trust_state_digest,
      lifecycle: trust.lifecycle,
      freshness: trust.freshness,
      authority: trust.authority
    })

    expect(await call("compare_current", { public_id: first, trust_state_digest: trust.trust_state_digest })).toEqual({
      changed: false,
      current_trust_state_digest: trust.trust_state_digest,
      compared_trust_state_digest: trust.trust_state_digest,
      changes: []
    })
    const stale = "0".repeat(64)
    expect(await call("compare_current", { public_id: first, trust_state_digest: stale })).toEqual({
      changed: true,
      current_trust_state_digest: trust.trust_state_digest,
      compared_trust_state_digest: stale,
      changes: [{ field: "trust_state_digest", previous: stale, current: trust.trust_state_digest }]
    })

    const evaluation = await call("evaluate_actionability", receiptArguments())
    const restEvaluation = await request(server, "POST", "/api/v1/actionability", { bearer: fullKey, body: receiptArguments() })
    expect(evaluation).toEqual(restEvaluation.body)
    expect(evaluation.decision).toBe("ACTIONABLE")

    const receipt = await call("create_reliance_receipt", receiptArguments())
    expect(receipt.receipt_id).toMatch(/^rr_[0-9A-HJKMNP-TV-Z]{26}$/)
    expect(receipt.idempotent).toBe(false)
    expect(receipt.authority_state).toBe("ISSUANCE_NOT_AUTHORIZED")
    expect(receipt.credential_state).toBe("NOT_ISSUED")
    expect(receipt.receipt_digest).toBe(digestOf(receipt.snapshot_payload))
    const again = await call("create_reliance_receipt", receiptArguments())
    expect(again).toEqual({ ...receipt, idempotent: true })

    const stored = await call("get_reliance_receipt", { receipt_id: receipt.receipt_id })
    const restStored = await request(server, "GET", `/api/v1/reliance-receipts/${receipt.receipt_id}`, { bearer: fullKey })
    expect(stored).toEqual(restStored.body)
    const { idempotent: _, ...withoutFlag } = receipt
    expect(stored).toEqual(withoutFlag)

    expect(await call("compare_current", { receipt_id: receipt.receipt_id })).toMatchObject({ changed: false, changes: [] })

    const subscription = await call("subscribe_trust_changes", { public_id: first })
    expect(subscription).toMatchObject({ public_id: first, delivery: "pull" })
    expect(subscription.subscription_id).toMatch(/^sub_/)
    expect(Number.isInteger(subscription.after)).toBe(true)
    expect(subscription.events_url).toContain(`public_id=${first}`)
    expect(await call("subscribe_trust_changes", { public_id: first })).toEqual(subscription)

    // A new version of the determination moves the trust state the receipt recorded.
    expect((await putDetermination(server, first, determinationBody(asOf, {
      subject: { subject_id: "sub_mcp", physical_subject_id: "phys_mcp", identity_state: "VERIFIED" },
      tier: "T1"
    }))).status).toBe(200)
    const moved = await call("compare_current", { receipt_id: receipt.receipt_id })
    expect(moved.changed).toBe(true)
    expect(moved.compared_trust_state_digest).toBe(receipt.trust_state_digest)
    expect(moved.current_trust_state_digest).not.toBe(receipt.trust_state_digest)
    const fields = moved.changes.map((c: any) => c.field)
    expect(fields).toEqual(expect.arrayContaining(["determination_id", "determination_digest", "tier", "trust_state_digest"]))
    expect(moved.changes.find((c: any) => c.field === "tier")).toEqual({ field: "tier", previous: "T2", current: "T1" })
    expect(fields).not.toContain("freshness_state")
  })

  it("answers an unknown tool with -32601", async () => {
    const client = await connect(fullKey)
    const error = await rpcError(client.callTool({ name: "issue_credential", arguments: {} }))
    expect(error.code).toBe(-32601)
  })

  it("answers arguments outside the input schema with -32602 and the failing pointers", async () => {
    const client = await connect(fullKey)
    const malformed = await rpcError(client.callTool({ name: "resolve_trust", arguments: { public_id: "not-an-id" } }))
    const data = expectProblemData(malformed, -32602, "validation-failed", 422)
    expect(data.errors.map((e: any) => e.pointer)).toEqual(["/public_id"])

    const missing = await rpcError(client.callTool({ name: "get_reliance_receipt", arguments: {} }))
    expect(expectProblemData(missing, -32602, "validation-failed", 422).errors).toEqual([
      { pointer: "/receipt_id", detail: expect.any(String) }
    ])

    const extra = await rpcError(client.callTool({ name: "resolve_lifecycle", arguments: { public_id: first, verbose: true } }))
    expect(expectProblemData(extra, -32602, "validation-failed", 422).errors.map((e: any) => e.pointer)).toEqual(["/verbose"])

    const both = await rpcError(client.callTool({ name: "resolve_subject", arguments: { public_id: first, subject_id: "sub_mcp" } }))
    expect(both.code).toBe(-32602)

    const prohibited = await rpcError(client.callTool({
      name: "create_reliance_receipt", arguments: receiptArguments({ decision: "ACTIONABLE", tier: "T4" })
    }))
    const prohibitedData = expectProblemData(prohibited, -32602, "prohibited-field", 422)
    expect(prohibitedData.errors.map((e: any) => e.pointer).sort()).toEqual(["/decision", "/tier"])

    const incomplete = await rpcError(client.callTool({ name: "evaluate_actionability", arguments: { tenant_id: "tenant-a" } }))
    expect(expectProblemData(incomplete, -32602, "validation-failed", 422).errors.length).toBeGreaterThanOrEqual(6)
  })

  it("answers domain failures with -32000 and the REST problem object as error.data", async () => {
    const client = await connect(fullKey)
    const unknown = await rpcError(client.callTool({ name: "resolve_trust", arguments: { public_id: "DET-V1-NOPE-0000" } }))
    expectProblemData(unknown, -32000, "determination-not-found", 404)
    const rest = await request(server, "GET", "/api/v1/trust/DET-V1-NOPE-0000/machine", { bearer: fullKey })
    const { instance: _, ...restProblem } = rest.body
    expect(unknown.data).toEqual(restProblem)

    const noSubject = await rpcError(client.callTool({ name: "resolve_subject", arguments: { subject_id: "sub_nobody" } }))
    expectProblemData(noSubject, -32000, "not-found", 404)

    const noReceipt = await rpcError(client.callTool({ name: "get_reliance_receipt", arguments: { receipt_id: "rr_01ARZ3NDEKTSV4RRFFQ69G5FAV" } }))
    expectProblemData(noReceipt, -32000, "receipt-not-found", 404)

    const foreignTenant = await rpcError(client.callTool({
      name: "create_reliance_receipt", arguments: receiptArguments({ tenant_id: "tenant-b" })
    }))
    expectProblemData(foreignTenant, -32000, "forbidden", 403)

    const purpose = await rpcError(client.callTool({
      name: "evaluate_actionability", arguments: receiptArguments({ purpose_id: "world-domination" })
    }))
    expectProblemData(purpose, -32000, "unknown-purpose", 422)

    const unsubscribable = await rpcError(client.callTool({ name: "subscribe_trust_changes", arguments: { public_id: "QUAL-V1-NOPE" } }))
    expectProblemData(unsubscribable, -32000, "determination-not-found", 404)

    await client.callTool({ name: "create_reliance_receipt", arguments: receiptArguments({ principal: "agent-conflict" }) })
    const conflict = await rpcError(client.callTool({
      name: "create_reliance_receipt", arguments: receiptArguments({ principal: "agent-conflict", organization: "Someone Else" })
    }))
    expectProblemData(conflict, -32000, "idempotency-conflict", 409)
  })

  it("keeps tenants apart: another tenant's receipt is not found, by get and by compare", async () => {
    const mine = await connect(fullKey)
    const receipt = (await mine.callTool({
      name: "create_reliance_receipt", arguments: receiptArguments({ principal: "agent-tenancy" })
    })).structuredContent as { receipt_id: string }
    const theirs = await connect(otherTenantKey)
    expectProblemData(await rpcError(theirs.callTool({ name: "get_reliance_receipt", arguments: { receipt_id: receipt.receipt_id } })),
      -32000, "receipt-not-found", 404)
    expectProblemData(await rpcError(theirs.callTool({ name: "compare_current", arguments: { receipt_id: receipt.receipt_id } })),
      -32000, "receipt-not-found", 404)
  })

  it("refuses each tool to a key without that tool's scope (insufficient-scope, -32000)", async () => {
    const validArguments: Record<string, Record<string, unknown>> = {
      resolve_trust: { public_id: first },
      resolve_subject: { public_id: first },
      compare_current: { public_id: first, trust_state_digest: "0".repeat(64) },
      resolve_lifecycle: { public_id: first },
      evaluate_actionability: receiptArguments(),
      create_reliance_receipt: receiptArguments({ principal: "agent-scope" }),
      get_reliance_receipt: { receipt_id: "rr_01ARZ3NDEKTSV4RRFFQ69G5FAV" },
      subscribe_trust_changes: { public_id: first }
    }
    const clientsByScope = new Map<string, Client>()
    for (const [name, scope] of Object.entries(ToolScopes)) {
      const client = clientsByScope.get(scope) ?? await connect(withoutScope[scope]!)
      clientsByScope.set(scope, client)
      const error = await rpcError(client.callTool({ name, arguments: validArguments[name]! }))
      const data = expectProblemData(error, -32000, "insufficient-scope", 403)
      expect(data.detail, name).toContain(scope)
      // Scope comes before argument checks: a key without the scope learns nothing about the schema.
      expectProblemData(await rpcError(client.callTool({ name, arguments: {} })), -32000, "insufficient-scope", 403)
    }
  })

  it("refuses the endpoint itself without a valid key (401) or without mcp:call (403), before reading JSON-RPC", async () => {
    await expect(connect("pv_live_invalid")).rejects.toThrow(/401/)
    await expect(connect(noMcpKey)).rejects.toThrow(/403/)
    const anonymous = await request(server, "POST", "/api/v1/mcp", { rawBody: "{", headers: defaultHeaders })
    expectHttpProblem(anonymous, 401, "unauthorized")
    expect(anonymous.headers.get("www-authenticate")).toMatch(/^Bearer realm="pv", error="invalid_token"/)
    const forbidden = await post("{", { key: noMcpKey })
    expectHttpProblem(forbidden, 403, "insufficient-scope")
    expect(forbidden.headers.get("www-authenticate")).toContain(`scope="mcp:call"`)
  })
})

describe(`MCP transport and JSON-RPC over raw HTTP (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("answers GET and DELETE with 405 and Allow: POST", async () => {
    for (const method of ["GET", "DELETE"]) {
      for (const bearer of [fullKey, undefined]) {
        const reply = await request(server, method, "/api/v1/mcp", {
          ...(bearer === undefined ? {} : { bearer }), headers: { accept: "text/event-stream" }
        })
        expectHttpProblem(reply, 405, "method-not-allowed")
        expect(reply.headers.get("allow")).toBe("POST")
      }
    }
  })

  it("refuses a body that is not JSON with 415, an Accept without application/json with 406", async () => {
    expectHttpProblem(await post(rpc(1, "ping"), { headers: { "content-type": "text/plain" } }), 415, "unsupported-media-type")
    expectHttpProblem(await post(rpc(1, "ping"), { headers: { accept: "text/event-stream" } }), 406, "not-acceptable")
    expectHttpProblem(await post(rpc(1, "ping"), { headers: { accept: "text/html" } }), 406, "not-acceptable")
    expectHttpProblem(await post(rpc(1, "ping"), { headers: { accept: "application/json;q=0, text/event-stream" } }), 406, "not-acceptable")
    // Only JSON is ever sent, so any Accept that admits it is enough; no Accept means anything goes (RFC 9110).
    for (const accept of ["application/json", "*/*", "application/*", ""]) {
      const reply = await post(rpc(1, "ping"), { headers: { accept } })
      expect(reply.status, accept).toBe(200)
      expect(reply.body).toEqual({ jsonrpc: "2.0", id: 1, result: {} })
    }
  })

  it("checks MCP-Protocol-Version: an unsupported value is 400 with -32022 and the served versions, a supported one is served", async () => {
    const refused = await post(rpc(1, "ping"), { headers: { "mcp-protocol-version": "1999-01-01" } })
    expect(refused.status).toBe(400)
    expect(refused.headers.get("content-type")).toMatch(/^application\/json/)
    expect(refused.body).toMatchObject({
      jsonrpc: "2.0",
      id: 1,
      error: { code: -32022, data: { supported: ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"], requested: "1999-01-01" } }
    })
    for (const version of ["2025-11-25", "2025-06-18", "2025-03-26"]) {
      expect((await post(rpc(1, "ping"), { headers: { "mcp-protocol-version": version } })).status).toBe(200)
    }
  })

  it("negotiates the protocol version: the client's when supported, else the newest", async () => {
    const init = (protocolVersion: unknown) =>
      post(rpc(1, "initialize", { protocolVersion, capabilities: {}, clientInfo: { name: "raw", version: "0" } }))
    for (const version of ["2025-11-25", "2025-06-18", "2025-03-26"]) {
      expect((await init(version)).body.result.protocolVersion).toBe(version)
    }
    const old = await init("2024-11-05")
    expect(old.status).toBe(200)
    expect(old.body.result).toMatchObject({
      protocolVersion: "2025-11-25",
      capabilities: { tools: {} },
      serverInfo: { name: "pv-trust", version: expect.any(String) },
      instructions: expect.stringContaining("NOT_AUTHORIZED")
    })
    expect(old.headers.get("mcp-session-id")).toBeNull()
    expect(old.headers.get("content-type")).toMatch(/^application\/json/)
    expect((await init(undefined)).body.error.code).toBe(-32602)
  })

  it("accepts notifications/initialized (and any notification-only body) with 202 and no body", async () => {
    const single = await post({ jsonrpc: "2.0", method: "notifications/initialized" })
    expect(single.status).toBe(202)
    expect(single.text).toBe("")
    const batch = await post([
      { jsonrpc: "2.0", method: "notifications/initialized" },
      { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } },
      { jsonrpc: "2.0", id: 99, result: {} }
    ])
    expect(batch.status).toBe(202)
    expect(batch.text).toBe("")
  })

  it("answers unparseable JSON with -32700 and id null", async () => {
    const reply = await post("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"")
    expect(reply.status).toBe(400)
    expect(reply.headers.get("content-type")).toMatch(/^application\/json/)
    expect(reply.body).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.any(String) } })
  })

  it("answers an empty batch and a non-message with -32600", async () => {
    const empty = await post("[]")
    expect(empty.status).toBe(400)
    expect(empty.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } })
    const wrongVersion = await post({ jsonrpc: "1.0", id: 5, method: "ping" })
    expect(wrongVersion.status).toBe(400)
    expect(wrongVersion.body).toMatchObject({ jsonrpc: "2.0", id: 5, error: { code: -32600 } })
  })

  it("answers an unknown method with -32601 and echoes string and numeric ids exactly, 0 included", async () => {
    expect((await post(rpc("x-1", "resources/list"))).body).toMatchObject({ id: "x-1", error: { code: -32601 } })
    for (const id of [0, "0", 1, -1, 1.5, "007", "", 9007199254740991]) {
      const reply = await post(rpc(id, "ping"))
      expect(reply.status).toBe(200)
      expect(reply.body).toEqual({ jsonrpc: "2.0", id, result: {} })
      expect(reply.text).toContain(`"id":${JSON.stringify(id)}`)
    }
  })

  it("answers a batch per JSON-RPC 2.0: one response per request, in order, none for notifications", async () => {
    const reply = await post([
      rpc(0, "ping"),
      { jsonrpc: "2.0", method: "notifications/initialized" },
      rpc("list", "tools/list"),
      rpc(2, "no/such/method"),
      rpc(3, "tools/call", { name: "resolve_trust", arguments: { public_id: first } }),
      rpc(4, "tools/call", { name: "resolve_trust", arguments: { public_id: "DET-V1-NOPE-0000" } }),
      17
    ])
    expect(reply.status).toBe(200)
    expect(reply.body.map((r: any) => r.id)).toEqual([0, "list", 2, 3, 4, null])
    expect(reply.body[0]).toEqual({ jsonrpc: "2.0", id: 0, result: {} })
    expect(reply.body[1].result.tools).toHaveLength(8)
    expect(reply.body[2].error.code).toBe(-32601)
    expect(reply.body[3].result.structuredContent.schema).toBe("pv.machine-trust.v1")
    expect(reply.body[4].error).toMatchObject({ code: -32000, data: { code: "determination-not-found", status: 404 } })
    expect(reply.body[5].error.code).toBe(-32600)
  })

  it("serves tools/call without an initialize (stateless) and checks tools/call params", async () => {
    const reply = await post(rpc(1, "tools/call", { name: "resolve_lifecycle", arguments: { public_id: first } }))
    expect(reply.body.result.structuredContent.public_id).toBe(first)
    const nameless = (await post(rpc(2, "tools/call", { arguments: {} }))).body.error
    expect(nameless).toMatchObject({ code: -32602, data: { code: "validation-failed", errors: [{ pointer: "/name" }] } })
    expect((await post(rpc(3, "tools/call", [1, 2]))).body.error.code).toBe(-32602)
    expect((await post(rpc(4, "tools/call", { name: "resolve_trust", arguments: "DET" }))).body.error.code).toBe(-32602)
  })

  it("refuses a message nested deeper than the body guard allows as an invalid request", async () => {
    const deep = "[".repeat(5000) + "]".repeat(5000)
    const reply = await post(`{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"resolve_trust","arguments":{"public_id":${deep}}}}`)
    expect(reply.status).toBe(400)
    expect(reply.body).toMatchObject({ jsonrpc: "2.0", id: "deep", error: { code: -32600 } })
  })

  it("still refuses bodies over 64 KiB with 413", async () => {
    const reply = await post(rpc(1, "ping", { padding: "x".repeat(70 * 1024) }))
    expectHttpProblem(reply, 413, "payload-too-large")
  })

  it("answers a body that is not UTF-8 with -32700 (never replaced characters), and a tools/call after it still works", async () => {
    const text = JSON.stringify(rpc(1, "tools/call", { name: "resolve_trust", arguments: { public_id: "DET-V1-X" } }))
    const at = text.indexOf("DET-V1-X")
    for (const bad of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82]]) {
      const bytes = Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from(bad), Buffer.from(text.slice(at))])
      const response = await fetch(`${server.baseUrl}/api/v1/mcp`, {
        method: "POST", headers: { ...defaultHeaders, authorization: `Bearer ${fullKey}` }, body: bytes
      })
      expect(response.status).toBe(400)
      expect(await response.json()).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.any(String) } })
    }
    const ok = await post(rpc(2, "tools/call", { name: "resolve_trust", arguments: { public_id: first } }))
    expect(ok.status).toBe(200)
    const twin = await request(server, "GET", `/api/v1/trust/${first}/machine`, { bearer: fullKey })
    expect(ok.body.result.structuredContent).toEqual(twin.body)
  })

  it("documents the endpoint in OpenAPI", async () => {
    const spec = await request(server, "GET", "/openapi.json")
    expect(spec.body.paths["/api/v1/mcp"].post).toBeDefined()
    expect(spec.body.paths["/api/v1/mcp"].get.responses["405"]).toBeDefined()
    expect(spec.body.paths["/api/v1/mcp"].get.responses["204"]).toBeUndefined()
  })
})
