/**
 * Evidence for docs/EFFECT4-PORT.md §5 ("effect/ai McpServer.layerHttp"): effect 4.1's own MCP server over
 * HTTP (McpServer.layerHttp with the revisions /api/v1/mcp serves, one tool), asked the raw requests
 * test/http/mcp2026.http.test.ts and test/http/mcp.http.test.ts put to ours. Prints each request and the
 * answer (status, session header, body). `node --import tsx bench/tools/mcpServerProbe.ts` (not a benchmark: it lives here to be type-checked)
 */
import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { McpProtocol, McpServer, Tool, Toolkit } from "effect/ai"
import { HttpRouter } from "effect/http"

const Echo = Tool.make("echo", {
  description: "Echoes its text.",
  parameters: Schema.Struct({ text: Schema.String }),
  success: Schema.Struct({ text: Schema.String })
})
const Tools = Toolkit.make(Echo)
const ToolsLive = Tools.toLayer({ echo: ({ text }) => Effect.succeed({ text }) })

const Mcp = McpServer.layerHttp({
  name: "probe",
  version: "1.0.0",
  path: "/mcp",
  protocols: [McpProtocol.v2026_07_28, McpProtocol.v2025_11_25, McpProtocol.v2025_06_18, McpProtocol.v2025_03_26],
  registrations: McpServer.toolkit(Tools).pipe(Layer.provide(ToolsLive))
})

const Modern = "2026-07-28"
const meta = {
  "io.modelcontextprotocol/protocolVersion": Modern,
  "io.modelcontextprotocol/clientInfo": { name: "probe", version: "1" },
  "io.modelcontextprotocol/clientCapabilities": {}
}
const modern = (id: unknown, method: string, params: Record<string, unknown> = {}) => JSON.stringify({ jsonrpc: "2.0", id, method, params: { _meta: meta, ...params } })
const headers = (method: string, name?: string) => ({
  "mcp-protocol-version": Modern,
  "mcp-method": method,
  ...(name === undefined ? {} : { "mcp-name": name })
})
const legacyInit = (version: string) =>
  JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: version, capabilities: {}, clientInfo: { name: "probe", version: "1" } } })

const cases: ReadonlyArray<{ readonly what: string; readonly method?: string; readonly body?: string; readonly headers?: Record<string, string> }> = [
  { what: "server/discover, 2026-07-28 headers", body: modern(1, "server/discover"), headers: headers("server/discover") },
  { what: "tools/list, 2026-07-28", body: modern(2, "tools/list"), headers: headers("tools/list") },
  { what: "tools/call, 2026-07-28, Mcp-Name matches", body: modern(3, "tools/call", { name: "echo", arguments: { text: "hi" } }), headers: headers("tools/call", "echo") },
  { what: "tools/call, bad arguments", body: modern(4, "tools/call", { name: "echo", arguments: { text: 1 } }), headers: headers("tools/call", "echo") },
  { what: "tools/call, unknown tool", body: modern(5, "tools/call", { name: "nope", arguments: {} }), headers: headers("tools/call", "nope") },
  { what: "Mcp-Method names another method", body: modern(6, "tools/list"), headers: headers("server/discover") },
  { what: "Mcp-Method missing", body: modern(7, "tools/list"), headers: { "mcp-protocol-version": Modern } },
  { what: "Mcp-Name missing on tools/call", body: modern(8, "tools/call", { name: "echo", arguments: { text: "x" } }), headers: headers("tools/call") },
  { what: "Mcp-Name does not match", body: modern(9, "tools/call", { name: "echo", arguments: { text: "x" } }), headers: headers("tools/call", "other") },
  { what: "protocol version not served (header and _meta 2099-01-01)", body: JSON.stringify({ jsonrpc: "2.0", id: 10, method: "server/discover", params: { _meta: { ...meta, "io.modelcontextprotocol/protocolVersion": "2099-01-01" } } }), headers: { "mcp-protocol-version": "2099-01-01", "mcp-method": "server/discover" } },
  { what: "header and _meta disagree", body: modern(11, "tools/list"), headers: { ...headers("tools/list"), "mcp-protocol-version": "2025-11-25" } },
  { what: "initialize under 2026-07-28 (not in the revision)", body: modern(12, "initialize"), headers: headers("initialize") },
  { what: "unknown method, 2026-07-28", body: modern(13, "nope/nope"), headers: headers("nope/nope") },
  { what: "initialize 2025-11-25 (legacy client)", body: legacyInit("2025-11-25") },
  { what: "tools/list 2025-11-25 without a session", body: JSON.stringify({ jsonrpc: "2.0", id: 14, method: "tools/list" }), headers: { "mcp-protocol-version": "2025-11-25" } },
  { what: "parse error", body: "{\"jsonrpc\":\"2.0\",", headers: headers("tools/list") },
  { what: "repeated member name", body: "{\"jsonrpc\":\"2.0\",\"id\":15,\"id\":16,\"method\":\"tools/list\",\"params\":{\"_meta\":" + JSON.stringify(meta) + "}}", headers: headers("tools/list") },
  { what: "batch, 2025-03-26", body: JSON.stringify([JSON.parse(legacyInit("2025-03-26")), { jsonrpc: "2.0", id: 2, method: "ping" }]), headers: { "mcp-protocol-version": "2025-03-26" } },
  { what: "batch, 2026-07-28", body: JSON.stringify([JSON.parse(modern(17, "tools/list")), JSON.parse(modern(18, "tools/list"))]), headers: headers("tools/list") },
  { what: "a posted response", body: JSON.stringify({ jsonrpc: "2.0", id: 19, result: {} }), headers: headers("tools/list") },
  { what: "GET", method: "GET" },
  { what: "DELETE", method: "DELETE", headers: { "mcp-session-id": "abc" } }
]

const program = Effect.gen(function*() {
  const port = yield* Effect.promise(() => new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port
      s.close(() => resolve(p))
    })
  }))
  yield* Layer.launch(
    HttpRouter.serve(Mcp).pipe(Layer.provide(NodeHttpServer.layer(createServer, { port, host: "127.0.0.1" })))
  ).pipe(Effect.forkScoped)
  yield* Effect.sleep("300 millis")
  for (const c of cases) {
    const method = c.method ?? "POST"
    const response = yield* Effect.promise(() =>
      fetch(`http://127.0.0.1:${port}/mcp`, {
        method,
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...c.headers },
        ...(method === "POST" ? { body: c.body } : {})
      })
    )
    const text = yield* Effect.promise(() => response.text())
    const session = response.headers.get("mcp-session-id")
    console.log(`### ${c.what}\n> ${method} ${JSON.stringify(c.headers ?? {})} ${c.body ?? ""}\n< ${response.status} ${response.headers.get("content-type") ?? ""}${session === null ? "" : ` mcp-session-id: ${session}`}\n< ${text.slice(0, 700)}\n`)
  }
})

Effect.runPromise(Effect.scoped(program)).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
