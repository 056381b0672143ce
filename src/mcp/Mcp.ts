import { Context, Effect, Layer, Option, Result, Schema } from "effect"
import type { Caller } from "../access/ApiKeys.js"
import { exceedsDepth, MaxJsonDepth } from "../domain/Json.js"
import {
  NotAcceptable,
  type ProblemError,
  toProblemDocument,
  UnsupportedMediaType,
  UnsupportedProtocolVersion,
  ValidationFailed
} from "../domain/Problem.js"
import { Subscriptions } from "../events/Subscriptions.js"
import { Receipts } from "../receipts/Receipts.js"
import { Determinations } from "../trust/Determinations.js"
import { TrustResolver } from "../trust/TrustResolver.js"
import * as JsonRpc from "./JsonRpc.js"
import { type EncodedResults, fieldErrorsOf, type Tool, tools, type ToolServices } from "./Tools.js"

/** Newest first: initialize echoes the client's version when listed here, else offers the newest. */
export const SupportedProtocolVersions = ["2025-11-25", "2025-06-18", "2025-03-26"] as const
export type ProtocolVersion = typeof SupportedProtocolVersions[number]
export const LatestProtocolVersion: ProtocolVersion = SupportedProtocolVersions[0]

export const isSupportedProtocolVersion = (version: unknown): version is ProtocolVersion =>
  (SupportedProtocolVersions as ReadonlyArray<unknown>).includes(version)

export const negotiateProtocolVersion = (requested: unknown): ProtocolVersion =>
  isSupportedProtocolVersion(requested) ? requested : LatestProtocolVersion

export const serverInfo = {
  name: "pv-trust",
  title: "Trust Resolution and Reliance Receipt Service",
  version: "1.0.0"
} as const

export const serverInstructions =
  "Tools over canonical trust documents (pv.machine-trust.v1) and durable reliance receipts (pv-reliance-receipt-v1). " +
  "Credential issuance is NOT_AUTHORIZED: issuance_authorized is false, no credential has been issued and none may be " +
  "inferred from any result. A successful resolution is not permission to rely: before relying, check that " +
  "freshness.state is CURRENT, that lifecycle.state fits the intended use, the authority state and the disclosed " +
  "claim scope (evaluate_actionability does all of this against the policy), then record the reliance with " +
  "create_reliance_receipt and act only on decision ACTIONABLE. Use compare_current to learn whether the trust state " +
  "moved since a resolution or a receipt. Tool failures are JSON-RPC errors: -32602 for arguments that do not match " +
  "the inputSchema, -32000 with error.data holding the same RFC 9457 problem object the REST API returns."

// ---- Streamable HTTP transport rules (stateless, JSON responses only) ----

const isJsonMediaType = (value: string | undefined) =>
  value !== undefined && /^application\/([a-z0-9.+-]*\+)?json\s*(;.*)?$/i.test(value.trim())

/**
 * Whether an Accept header admits application/json, the only type this server answers with. No header
 * means anything is acceptable (RFC 9110); `application/*` and `*\/*` admit it; q=0 refuses.
 */
export const acceptsJson = (accept: string | undefined): boolean => {
  if (accept === undefined || accept.trim() === "") return true
  const ranges = accept.split(",").map((range) => {
    const [type = "", ...params] = range.split(";").map((part) => part.trim().toLowerCase())
    const q = params.find((param) => param.startsWith("q="))
    return { type, refused: q !== undefined && Number(q.slice(2)) === 0 }
  })
  const exact = ranges.find((range) => range.type === "application/json")
  if (exact !== undefined) return !exact.refused
  return ranges.some((range) => !range.refused && (range.type === "application/*" || range.type === "*/*"))
}

/**
 * The transport's refusals, checked before the body is read: a body that is not JSON (415), an Accept
 * header that rules out application/json (406; the spec asks clients for both application/json and
 * text/event-stream, and this server always answers JSON), an unsupported MCP-Protocol-Version (400).
 */
export const transportProblem = (
  headers: Readonly<Record<string, string | undefined>>
): Option.Option<UnsupportedMediaType | NotAcceptable | UnsupportedProtocolVersion> => {
  if (!isJsonMediaType(headers["content-type"])) {
    return Option.some(new UnsupportedMediaType({ detail: "Send JSON-RPC messages as application/json." }))
  }
  if (!acceptsJson(headers["accept"])) {
    return Option.some(new NotAcceptable({
      detail: "This MCP endpoint answers with application/json only (no SSE); send Accept: application/json, text/event-stream."
    }))
  }
  const version = headers["mcp-protocol-version"]
  if (version !== undefined && !isSupportedProtocolVersion(version)) {
    return Option.some(new UnsupportedProtocolVersion({
      detail: `MCP-Protocol-Version ${version.slice(0, 40)} is not supported; use one of ${SupportedProtocolVersions.join(", ")}.`
    }))
  }
  return Option.none()
}

// ---- Methods ----

const InitializeParams = Schema.Struct({
  protocolVersion: Schema.String,
  capabilities: Schema.optionalKey(Schema.ObjectKeyword),
  clientInfo: Schema.optionalKey(Schema.ObjectKeyword)
})

const CallToolParams = Schema.Struct({
  name: Schema.String,
  arguments: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
})

/** -32602, with the same validation problem object (pointers in `errors`) as a tool's bad arguments. */
const invalidParams = (method: string, error: Schema.SchemaError) =>
  new JsonRpc.RpcFailure({
    code: JsonRpc.ErrorCode.InvalidParams,
    message: `Invalid params for ${method}.`,
    data: toProblemDocument(new ValidationFailed({
      detail: `The params of ${method} do not match what the method takes.`,
      errors: fieldErrorsOf(error.issue)
    }))
  })

const decodeParams = <A, I>(method: string, schema: Schema.Codec<A, I>, params: JsonRpc.Params | undefined) =>
  Effect.fromResult(Result.mapError(
    Schema.decodeUnknownResult(schema)(params ?? {}, { errors: "all" }),
    (error) => invalidParams(method, error)
  ))

/** A tool's domain failure: -32000 with the REST problem object as data. */
const toolFailure = (error: ProblemError) => {
  const problem = toProblemDocument(error)
  return new JsonRpc.RpcFailure({ code: JsonRpc.ErrorCode.ToolFailure, message: `${problem.title}: ${problem.detail}`, data: problem })
}

/** The REST body guard's nesting limit, applied per message (the guard skips this raw-body endpoint). */
const messageLimits: JsonRpc.Limits = {
  refuse: (message) => (exceedsDepth(message, MaxJsonDepth) ? `nesting deeper than ${MaxJsonDepth} levels is not accepted.` : undefined)
}

const describeTool = (tool: Tool) => ({
  name: tool.name,
  title: tool.title,
  description: tool.description,
  inputSchema: tool.inputSchema,
  outputSchema: tool.outputSchema,
  annotations: tool.annotations
})

const make = Effect.gen(function*() {
  const services = yield* Effect.context<ToolServices>()
  const byName = new Map(tools.map((tool) => [tool.name, tool]))
  const toolList = { tools: tools.map(describeTool) }
  // Each tool's already-encoded results, for as long as this service lives.
  const encoded = new Map(tools.map((tool): [string, EncodedResults] => [tool.name, new WeakMap()]))

  const callTool = (params: JsonRpc.Params | undefined) =>
    Effect.gen(function*() {
      const { name, arguments: args } = yield* decodeParams("tools/call", CallToolParams, params)
      const tool = byName.get(name)
      if (tool === undefined) {
        return yield* Effect.fail(new JsonRpc.RpcFailure({
          code: JsonRpc.ErrorCode.MethodNotFound,
          message: `Unknown tool: ${name.slice(0, 100)}. tools/list names the ${tools.length} tools.`
        }))
      }
      const result = yield* tool.call(args ?? {}, encoded.get(name)!).pipe(
        Effect.provideContext(services),
        Effect.mapError((error) =>
          error._tag === "InvalidArguments"
            ? new JsonRpc.RpcFailure({
              code: JsonRpc.ErrorCode.InvalidParams,
              message: `Invalid params: the arguments do not match the inputSchema of ${name}.`,
              data: toProblemDocument(error.problem)
            })
            : toolFailure(error)
        )
      )
      return new JsonRpc.PreEncoded(result.callResultJson)
    })

  const request = (method: string, params: JsonRpc.Params | undefined): Effect.Effect<unknown, JsonRpc.RpcFailure, Caller> => {
    switch (method) {
      case "initialize":
        return Effect.map(decodeParams(method, InitializeParams, params), ({ protocolVersion }) => ({
          protocolVersion: negotiateProtocolVersion(protocolVersion),
          capabilities: { tools: { listChanged: false } },
          serverInfo,
          instructions: serverInstructions
        }))
      case "ping":
        return Effect.succeed({})
      case "tools/list":
        return Effect.succeed(toolList)
      case "tools/call":
        return callTool(params)
      default:
        return Effect.fail(JsonRpc.methodNotFound(method))
    }
  }

  /** One POST body → the reply; defects are logged here and answered -32603 with no detail. */
  const answer = (body: string): Effect.Effect<JsonRpc.Reply, never, Caller> =>
    JsonRpc.answer(body, {
      request: (method, params) =>
        request(method, params).pipe(Effect.tapDefect((defect) => Effect.logError(`MCP ${method.slice(0, 100)} failed`, defect))),
      // Stateless: notifications/initialized, cancelled and the rest change nothing here.
      notification: () => Effect.void
    }, messageLimits)

  return { answer, toolList } as const
})

/**
 * MCP over JSON-RPC: initialize, ping, tools/list and tools/call, statelessly (no session: every POST
 * stands alone, so tools/call needs no earlier initialize). Tools run as the calling API key (`Caller`).
 */
export class Mcp extends Context.Service<Mcp, Effect.Success<typeof make>>()("pv/Mcp", { make }) {
  static readonly layerNoDeps = Layer.effect(this, make)
  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([TrustResolver.layer, Determinations.layer, Receipts.layer, Subscriptions.layer])
  )
}
