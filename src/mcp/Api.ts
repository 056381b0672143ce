import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { ApiKeyAuth, RequiredScope } from "../api/Auth.js"
import {
  MethodNotAllowed,
  NotAcceptable,
  PayloadTooLarge,
  UnsupportedMediaType
} from "../domain/Problem.js"

const Id = Schema.Union([Schema.String, Schema.Number]).annotate({ description: "Echoed unchanged in the response" })

/** Documentation only: the handler reads the raw body, so malformed JSON reaches the JSON-RPC codec (-32700). */
const JsonRpcMessage = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  id: Schema.optionalKey(Id.annotate({ description: "Absent for a notification, which is never answered" })),
  method: Schema.String.annotate({
    examples: ["server/discover", "tools/list", "tools/call", "initialize", "ping", "notifications/initialized"]
  }),
  params: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
}).annotate({ identifier: "JsonRpcMessage" })

/** One answer; src/mcp/JsonRpc.ts encodes every envelope it sends through this schema. */
export const JsonRpcResponse = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  id: Schema.NullOr(Id),
  result: Schema.optionalKey(Schema.Unknown),
  error: Schema.optionalKey(Schema.Struct({ code: Schema.Int, message: Schema.String, data: Schema.optionalKey(Schema.Unknown) }))
}).annotate({ identifier: "JsonRpcResponse" })

const Body = Schema.Union([JsonRpcMessage, Schema.NonEmptyArray(JsonRpcMessage)])
const Answer = Schema.Union([JsonRpcResponse, Schema.NonEmptyArray(JsonRpcResponse)])

const TransportHeaders = Schema.Struct({
  accept: Schema.optionalKey(Schema.String.annotate({
    description: "Must admit application/json (406 otherwise); MCP clients send `application/json, text/event-stream`"
  })),
  "mcp-protocol-version": Schema.optionalKey(Schema.String.annotate({
    description: "2026-07-28 (required then, equal to params._meta[\"io.modelcontextprotocol/protocolVersion\"]), " +
      "2025-11-25, 2025-06-18 or 2025-03-26 (absent: 2025-03-26); any other value is refused with 400 and JSON-RPC -32022"
  })),
  "mcp-method": Schema.optionalKey(Schema.String.annotate({
    description: "2026-07-28: required, equal to the body's method (400 and -32020 otherwise)"
  })),
  "mcp-name": Schema.optionalKey(Schema.String.annotate({
    description: "2026-07-28 tools/call: required, equal to params.name, plain or =?base64?…?= (400 and -32020 otherwise)"
  }))
})

const noStream = "This server is stateless and answers every POST with JSON: it offers no SSE stream and no sessions."

/** GET and DELETE never succeed here: drop the default 204 HttpApi documents for an endpoint. */
const neverSucceeds = (operation: Record<string, any>) => {
  const { "204": _, ...responses } = operation.responses ?? {}
  return { ...operation, responses }
}

export class McpApi extends HttpApiGroup.make("mcp")
  .add(
    HttpApiEndpoint.post("call", "/mcp", {
      payload: Body,
      headers: TransportHeaders,
      success: [Answer, HttpApiSchema.Empty(202)],
      // 401, 403 (mcp:call) and 429/503 are ApiKeyAuth's declared errors, documented with the middleware.
      error: [NotAcceptable, PayloadTooLarge, UnsupportedMediaType]
    })
      .middleware(ApiKeyAuth)
      .annotate(RequiredScope, "mcp:call")
      .annotate(OpenApi.Summary, "MCP (Streamable HTTP) and JSON-RPC 2.0 tool calls")
      .annotate(OpenApi.Description,
        "Two protocol eras on one endpoint, both stateless (docs/API.md, \"MCP\"). MCP 2026-07-28: server/discover, " +
        "tools/list and tools/call, each request carrying params._meta with io.modelcontextprotocol/protocolVersion and " +
        "io.modelcontextprotocol/clientCapabilities, mirrored by the MCP-Protocol-Version, Mcp-Method and Mcp-Name headers; " +
        "every result has resultType, server/discover and tools/list carry ttlMs and cacheScope; a failing tool answers a " +
        "result with isError. Refusals: 400 with -32022 (version not served, data.supported), -32020 (header missing or " +
        "not matching the body), -32602 (per-request metadata missing or malformed), -32600 (a batch); 404 with -32601 " +
        "(a method this revision does not define here, such as initialize, ping or subscriptions/listen). " +
        "MCP 2025-11-25, 2025-06-18, 2025-03-26: initialize, notifications/initialized, ping, " +
        "tools/list and tools/call with the 8 tools resolve_trust, resolve_subject, evaluate_actionability, " +
        "create_reliance_receipt, get_reliance_receipt, compare_current, resolve_lifecycle, subscribe_trust_changes; " +
        "each tool also needs its own scope. Batches (arrays) are answered per JSON-RPC 2.0 for 2025-03-26 (or no " +
        "MCP-Protocol-Version header) only, and refused with -32600 otherwise. A body holding only " +
        "notifications or responses is accepted with 202 and no body. Unparseable JSON or a repeated member name " +
        "(-32700, data.pointer), an empty batch or a " +
        "single message that is not JSON-RPC (-32600) answer 400 with a JSON-RPC error (id null when unknown). " +
        "Tool failures: -32601 unknown tool, -32602 arguments outside the inputSchema, -32000 with error.data = the " +
        "REST problem object, -32603 internal. " + noStream)
  )
  .add(
    HttpApiEndpoint.get("stream", "/mcp", { error: MethodNotAllowed })
      .annotate(OpenApi.Summary, "No server-sent event stream: always 405 (Allow: POST)")
      .annotate(OpenApi.Description, noStream)
      .annotate(OpenApi.Transform, neverSucceeds)
  )
  .add(
    HttpApiEndpoint.delete("endSession", "/mcp", { error: MethodNotAllowed })
      .annotate(OpenApi.Summary, "No sessions to end: always 405 (Allow: POST)")
      .annotate(OpenApi.Description, noStream)
      .annotate(OpenApi.Transform, neverSucceeds)
  )
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "MCP tools (JSON-RPC 2.0)") {}
