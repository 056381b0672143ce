import { Clock, Context, Effect, Layer, Option, Result, Schema } from "effect"
import { Caller } from "../access/ApiKeys.js"
import { nextFreshnessBoundary } from "../domain/Freshness.js"
import { exceedsDepth, MaxJsonDepth, opensAtMost } from "../domain/Json.js"
import { memoByText } from "../domain/Memo.js"
import {
  NotAcceptable,
  type ProblemDocument,
  type ProblemError,
  toProblemDocument,
  UnsupportedMediaType,
  ValidationFailed
} from "../domain/Problem.js"
import { Subscriptions } from "../webhooks/Subscriptions.js"
import { Receipts } from "../receipts/Receipts.js"
import { Determinations } from "../trust/Determinations.js"
import { TrustResolver } from "../trust/TrustResolver.js"
import * as Era from "./Era.js"
import * as JsonRpc from "./JsonRpc.js"
import { type EncodedResult, type EncodedResults, fieldErrorsOf, type InvalidArguments, type Tool, type ToolServices } from "./ToolDefinition.js"
import { tools } from "./Tools.js"

export {
  isSupportedProtocolVersion,
  LatestProtocolVersion,
  ModernProtocolVersion,
  negotiateProtocolVersion,
  type ProtocolVersion,
  ServedProtocolVersions,
  SupportedProtocolVersions
} from "./Era.js"

export const serverInfo = {
  name: "pv-trust",
  title: "Trust Resolution and Reliance Receipt Service",
  version: "1.0.0"
} as const

const instructionsBase =
  "Tools over canonical trust documents (pv.machine-trust.v1) and durable reliance receipts (pv-reliance-receipt-v1). " +
  "Credential issuance is NOT_AUTHORIZED: issuance_authorized is false, no credential has been issued and none may be " +
  "inferred from any result. A successful resolution is not permission to rely: before relying, check that " +
  "freshness.state is CURRENT, that lifecycle.state fits the intended use, the authority state and the disclosed " +
  "claim scope (evaluate_actionability does all of this against the policy), then record the reliance with " +
  "create_reliance_receipt and act only on decision ACTIONABLE. Use compare_current to learn whether the trust state " +
  "moved since a resolution or a receipt. "

/** The instructions `initialize` returns (2025 revisions): tool failures are JSON-RPC errors there. */
export const serverInstructions = instructionsBase +
  "Tool failures are JSON-RPC errors: -32602 for arguments that do not match " +
  "the inputSchema, -32000 with error.data holding the same RFC 9457 problem object the REST API returns."

/** The instructions `server/discover` returns (2026-07-28): tool failures are results the model can read. */
export const modernServerInstructions = instructionsBase +
  "A tool that fails answers a result with isError true whose text is the same RFC 9457 problem object the REST API " +
  "returns (arguments that do not match the inputSchema: validation-failed, with a JSON pointer per error); an unknown " +
  "tool name is JSON-RPC error -32602. A resolve_trust or resolve_lifecycle result carries ttlMs: it may be cached " +
  "that long, until the document's next freshness boundary, and never across callers (cacheScope private)."

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

const unsupportedMediaType = () => new UnsupportedMediaType({ detail: "Send JSON-RPC messages as application/json." })
const notAcceptable = () =>
  new NotAcceptable({
    detail: "This MCP endpoint answers with application/json only (no SSE); send Accept: application/json, text/event-stream."
  })

/**
 * The transport's refusals, checked before the body is read: a body that is not JSON (415), an Accept
 * header that rules out application/json (406; the spec asks clients for both application/json and
 * text/event-stream, and this server always answers JSON). The protocol version is checked with the
 * body (Era.ts), since revision 2026-07-28 answers an unsupported one with a JSON-RPC error for the request's id.
 */
export const transportProblem = (
  headers: Readonly<Record<string, string | undefined>>
): Option.Option<UnsupportedMediaType | NotAcceptable> => {
  if (!isJsonMediaType(headers["content-type"])) return Option.some(unsupportedMediaType())
  if (!acceptsJson(headers["accept"])) return Option.some(notAcceptable())
  return Option.none()
}

/**
 * `transportProblem` with the two header rules remembered per distinct header value (clients send the same
 * values on every call), for the service that answers every POST.
 */
export const rememberedTransportProblem = () => {
  const jsonType = memoByText(isJsonMediaType)
  const accepts = memoByText(acceptsJson)
  return (headers: Readonly<Record<string, string | undefined>>): Option.Option<UnsupportedMediaType | NotAcceptable> => {
    const type = headers["content-type"]
    if (type === undefined || !jsonType(type)) return Option.some(unsupportedMediaType())
    const accept = headers["accept"]
    if (accept !== undefined && !accepts(accept)) return Option.some(notAcceptable())
    return Option.none()
  }
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

const decodeCallToolParams = Schema.decodeUnknownResult(CallToolParams)

const isPlainObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * tools/call params → `CallToolParams`. The shape every client sends (a string name, arguments an object
 * or absent) is taken as it is, as the schema would decode it; anything else goes through the schema,
 * which decides and words the error. A property test holds the two together.
 */
export const callToolParamsOf = (params: unknown): Result.Result<typeof CallToolParams.Type, Schema.SchemaError> => {
  if (isPlainObject(params) && typeof params.name === "string") {
    const args = params.arguments
    if (args === undefined && !Object.hasOwn(params, "arguments")) return Result.succeed({ name: params.name })
    if (isPlainObject(args)) return Result.succeed({ name: params.name, arguments: args })
  }
  return decodeCallToolParams(params ?? {}, { errors: "all" })
}

const errorObject = ({ code, message, data }: JsonRpc.RpcFailure): JsonRpc.ErrorObject =>
  data === undefined ? { code, message } : { code, message, data }

const reply200 = (response: JsonRpc.Response): JsonRpc.Reply => ({ _tag: "Answer", status: 200, body: JsonRpc.encodeResponse(response) })

/** A tool's domain failure: -32000 with the REST problem object as data. */
const toolFailure = (error: ProblemError) => {
  const problem = toProblemDocument(error)
  return new JsonRpc.RpcFailure({ code: JsonRpc.ErrorCode.ToolFailure, message: `${problem.title}: ${problem.detail}`, data: problem })
}

/** The REST body guard's nesting limit, applied per message (the guard skips this raw-body endpoint). */
const messageLimits: JsonRpc.Limits = {
  refuse: (message) => (exceedsDepth(message, MaxJsonDepth) ? `nesting deeper than ${MaxJsonDepth} levels is not accepted.` : undefined)
}

const noLimits: JsonRpc.Limits = {}

/** The limits for a body: a body that opens at most MaxJsonDepth arrays and objects cannot break the nesting limit, so its messages skip the walk. */
const limitsFor = (body: string): JsonRpc.Limits => (opensAtMost(body, MaxJsonDepth) ? noLimits : messageLimits)

const describeTool = (tool: Tool) => ({
  name: tool.name,
  title: tool.title,
  description: tool.description,
  inputSchema: tool.inputSchema,
  outputSchema: tool.outputSchema,
  annotations: tool.annotations
})

/** The result `_meta` every 2026-07-28 result carries: who answered. */
const modernMeta = { [Era.MetaKeys.serverInfo]: serverInfo }
const modernMetaJson = JSON.stringify(modernMeta)

/**
 * How long a list or a discovery result may be cached (`ttlMs`, 2026-07-28 caching): the tools and the
 * served revisions change only with a deployment, and are the same for every caller (`public`).
 */
export const StaticResultTtlMs = 3_600_000

/** A trust document's freshness window (resolve_trust, resolve_lifecycle results), or undefined for other results. */
const freshnessWindow = (value: unknown): { readonly asOfMs: number; readonly validUntilMs: number } | undefined => {
  const freshness = typeof value === "object" && value !== null ? (value as { freshness?: unknown }).freshness : undefined
  if (typeof freshness !== "object" || freshness === null) return undefined
  const { as_of, valid_until } = freshness as { as_of?: unknown; valid_until?: unknown }
  if (typeof as_of !== "string" || typeof valid_until !== "string") return undefined
  return { asOfMs: Date.parse(as_of), validUntilMs: Date.parse(valid_until) }
}

/** The cache hint's ttlMs at `nowMs` for the next freshness boundary `boundary` (none: 0). */
const ttlAt = (boundary: number | null, nowMs: number) =>
  boundary === null || !Number.isFinite(boundary) ? 0 : Math.max(0, boundary - nowMs)

const hintText = (ttlMs: number) => `,"ttlMs":${ttlMs},"cacheScope":"private"`

const cacheHintText = (boundary: number | null, nowMs: number) => hintText(ttlAt(boundary, nowMs))

/**
 * The cache hint of a tool result that carries a trust document's freshness (resolve_trust,
 * resolve_lifecycle): fresh until the document's next
 * freshness boundary (where `freshness.state` moves), private to the caller's API key. A later write to
 * the determination may change the document sooner: ttlMs is a hint, as the revision defines it.
 */
export const trustCacheHint = (value: unknown, nowMs: number): string => {
  const window = freshnessWindow(value)
  return window === undefined ? "" : cacheHintText(nextFreshnessBoundary(nowMs, window.asOfMs, window.validUntilMs), nowMs)
}

const modernResultHead = `{"resultType":"complete",`
const modernResultTail = `,"_meta":${modernMetaJson}}`

/** A success reply kept with what it was written for: the request id and, in 2026-07-28, the hint's ttlMs. */
interface KeptReply {
  readonly id: JsonRpc.RequestId
  readonly ttlMs: number
  readonly reply: JsonRpc.Reply
}

/**
 * One tool result's `tools/call` result text, per era, made on first use and kept as long as the result is
 * (tool results are immutable: a cached trust document is the same object until its state changes). Only
 * the id and, in 2026-07-28, the cache hint's `ttlMs` differ from call to call: a reply joins the kept text
 * with them (JavaScript strings join without copying; Node encodes the reply once, straight into the
 * socket's write) instead of building and encoding the result again. The last reply of each era is kept
 * too, as GET /machine keeps its document's answer: a call with the same id (and, in 2026-07-28, at the
 * same ttlMs) gets that very reply, the same text object, so nothing of its ~5 KB is joined, measured or
 * allocated again; any other call writes a new one, through the same writer.
 */
export class ResultText {
  private modernHead: string | undefined
  private readonly window: ReturnType<typeof freshnessWindow>
  // The next freshness boundary, the answer for every instant in [boundaryFromMs, boundaryUntilMs).
  private boundary: number | null = null
  private boundaryFromMs = Number.POSITIVE_INFINITY
  private boundaryUntilMs = Number.NEGATIVE_INFINITY
  private lastLegacy: KeptReply | undefined
  private lastModern: KeptReply | undefined

  constructor(private readonly result: EncodedResult) {
    this.window = freshnessWindow(result.value)
  }

  /** 2025 revisions: the result is the tool's `{ content, structuredContent }`. */
  get legacy(): string {
    return this.result.callResultJson
  }

  /** 2026-07-28: resultType, the tool's members, the cache hint at `nowMs`, `_meta`. */
  modern(nowMs: number): string {
    return this.modernText(this.ttlMs(nowMs))
  }

  /**
   * The 200 reply to a `tools/call` with request id `id` answered by this result at `nowMs`: the success
   * envelope (`JsonRpc.successText`) around `legacy` or `modern(nowMs)`, the kept one when the last reply
   * of the era was written for the same id and ttlMs.
   */
  reply(id: JsonRpc.RequestId, modern: boolean, nowMs: number): JsonRpc.Reply {
    if (!modern) {
      const last = this.lastLegacy
      if (last !== undefined && last.id === id) return last.reply
      const reply: JsonRpc.Reply = { _tag: "Answer", status: 200, body: JsonRpc.successText(id, this.legacy) }
      this.lastLegacy = { id, ttlMs: -1, reply }
      return reply
    }
    const ttlMs = this.ttlMs(nowMs)
    const last = this.lastModern
    if (last !== undefined && last.id === id && last.ttlMs === ttlMs) return last.reply
    const reply: JsonRpc.Reply = { _tag: "Answer", status: 200, body: JsonRpc.successText(id, this.modernText(ttlMs)) }
    this.lastModern = { id, ttlMs, reply }
    return reply
  }

  /** The 2026-07-28 result with the hint for `ttlMs` (-1: a result without a freshness window, no hint). */
  private modernText(ttlMs: number): string {
    this.modernHead ??= modernResultHead + this.result.callResultJson.slice(1, -1)
    return this.modernHead + (ttlMs < 0 ? "" : hintText(ttlMs)) + modernResultTail
  }

  /** The hint's ttlMs at `nowMs`, or -1 for a result that carries no hint. */
  private ttlMs(nowMs: number): number {
    const window = this.window
    if (window === undefined) return -1
    if (!(this.boundaryFromMs <= nowMs && nowMs < this.boundaryUntilMs)) {
      // Boundaries are fixed instants: the first one after nowMs stays the answer until it is reached.
      this.boundary = nextFreshnessBoundary(nowMs, window.asOfMs, window.validUntilMs)
      this.boundaryFromMs = nowMs
      this.boundaryUntilMs = this.boundary ?? Number.POSITIVE_INFINITY
    }
    return ttlAt(this.boundary, nowMs)
  }
}

/**
 * A tool execution error (2026-07-28): a result with isError, so the model sees what to correct. The text
 * is the REST problem object (for bad arguments: validation-failed with a pointer per error).
 */
export const toolErrorResult = (problem: ProblemDocument) => ({
  resultType: "complete",
  content: [{ type: "text", text: JSON.stringify(problem) }],
  isError: true,
  _meta: modernMeta
})

/** The methods of `Mcp`. `answer` serves every POST of the endpoint: a plain function with no span. */
export interface McpShape {
  /**
   * One POST body and its headers → the reply; defects are logged and answered -32603 with no detail. The
   * headers matter only to the era rules (Era.ts).
   */
  readonly answer: (body: string, headers?: Era.Headers) => Effect.Effect<JsonRpc.Reply, never, Caller>
  /** tools/list's result in the 2025 revisions (declaration order). */
  readonly toolList: { readonly tools: ReadonlyArray<ReturnType<typeof describeTool>> }
  /** The transport's refusals (415, 406), checked before the body is read; header rules remembered per value. */
  readonly transportProblem: (headers: Readonly<Record<string, string | undefined>>) => Option.Option<UnsupportedMediaType | NotAcceptable>
}

const make = Effect.gen(function*() {
  // The tools' four services, added to the request's context as four entries on top of it. Providing them
  // as a Context would merge: two copies of the whole request context (every service of the app) on every
  // tools/call.
  const [trustResolver, determinations, receipts, subscriptions] = [yield* TrustResolver, yield* Determinations, yield* Receipts, yield* Subscriptions]
  const withToolServices = (context: Context.Context<Caller>): Context.Context<Caller | ToolServices> =>
    Context.add(Context.add(Context.add(Context.add(context, TrustResolver, trustResolver), Determinations, determinations), Receipts, receipts), Subscriptions, subscriptions)
  const byName = new Map(tools.map((tool) => [tool.name, tool]))
  const peekers = new Map(tools.map((tool) => [tool.name, tool.peeker()]))
  // Declaration order (Tools.ts), the same on every request: clients and prompt caches may rely on it.
  const toolList = { tools: tools.map(describeTool) }
  const modernToolList = new JsonRpc.PreEncoded(JSON.stringify({
    resultType: "complete",
    ...toolList,
    ttlMs: StaticResultTtlMs,
    cacheScope: "public",
    _meta: modernMeta
  }))
  const discovery = new JsonRpc.PreEncoded(JSON.stringify({
    resultType: "complete",
    supportedVersions: Era.ServedProtocolVersions,
    capabilities: { tools: { listChanged: false } },
    instructions: modernServerInstructions,
    ttlMs: StaticResultTtlMs,
    cacheScope: "public",
    _meta: modernMeta
  }))
  // Each tool's already-encoded results, for as long as this service lives, and their reply bytes.
  const encoded = new Map(tools.map((tool): [string, EncodedResults] => [tool.name, new WeakMap()]))
  const replyTexts = new WeakMap<EncodedResult, ResultText>()
  const textOf = (result: EncodedResult) => {
    let text = replyTexts.get(result)
    if (text === undefined) replyTexts.set(result, text = new ResultText(result))
    return text
  }
  const runTool = (tool: Tool, args: Record<string, unknown> | undefined) =>
    Effect.updateContext(tool.call(args ?? {}, encoded.get(tool.name)!), withToolServices)

  /**
   * tools/call params → the tool and its arguments, synchronously. An unknown tool is -32601 in the 2025
   * revisions and -32602 in 2026-07-28 (the spec's example).
   */
  const findTool = (params: JsonRpc.Params | undefined, unknownToolCode: number) => {
    const decoded = callToolParamsOf(params)
    if (Result.isFailure(decoded)) return Result.fail(invalidParams("tools/call", decoded.failure))
    const { name, arguments: args } = decoded.success
    const tool = byName.get(name)
    return tool === undefined
      ? Result.fail(new JsonRpc.RpcFailure({ code: unknownToolCode, message: `Unknown tool: ${name.slice(0, 100)}. tools/list names the ${tools.length} tools.` }))
      : Result.succeed({ tool, args })
  }

  /** A tool's failure in the 2025 revisions: bad arguments -32602, a domain failure -32000, both with the problem. */
  const legacyToolError = (name: string, error: InvalidArguments | ProblemError) =>
    error._tag === "InvalidArguments"
      ? new JsonRpc.RpcFailure({
        code: JsonRpc.ErrorCode.InvalidParams,
        message: `Invalid params: the arguments do not match the inputSchema of ${name}.`,
        data: toProblemDocument(error.problem)
      })
      : toolFailure(error)

  /** tools/call inside a 2025-03-26 batch (through the generic handlers). */
  const callTool = (params: JsonRpc.Params | undefined): Effect.Effect<unknown, JsonRpc.RpcFailure, Caller> => {
    const found = findTool(params, JsonRpc.ErrorCode.MethodNotFound)
    if (Result.isFailure(found)) return Effect.fail(found.failure)
    const { tool, args } = found.success
    return Effect.mapBoth(runTool(tool, args), {
      onFailure: (error) => legacyToolError(tool.name, error),
      onSuccess: (result) => new JsonRpc.PreEncoded(result.callResultJson)
    })
  }

  /** A defect of a tools/call: logged, and answered -32603 with no detail. */
  const toolsCallDefect = (id: JsonRpc.RequestId, defect: unknown) =>
    Effect.as(Effect.logError("MCP tools/call failed", defect), reply200(JsonRpc.internalError(id)))

  /**
   * A single tools/call request of either era → its reply, in as few steps as the work allows: the params,
   * the tool, the scope and the arguments are checked synchronously, and the tool's result is spliced into
   * the envelope as the text it was encoded to once. A result the services hold in memory (a cached trust
   * document) is answered in one step that reads the clock and the caller from the fiber, with no Effect to
   * run; only a call that needs the tool's own work runs it. The same checks, codes and results as every
   * other method (the generic path answers batches); a defect is logged and answered -32603.
   */
  const toolsCall = (id: JsonRpc.RequestId, params: JsonRpc.Params | undefined, modern: boolean): Effect.Effect<JsonRpc.Reply, never, Caller> => {
    const found = findTool(params, modern ? JsonRpc.ErrorCode.InvalidParams : JsonRpc.ErrorCode.MethodNotFound)
    if (Result.isFailure(found)) return Effect.succeed(reply200(JsonRpc.failure(id, errorObject(found.failure))))
    const { tool, args } = found.success
    return Effect.withFiber((fiber) => {
      const clock = fiber.getRef(Clock.Clock)
      try {
        const nowMs = clock.currentTimeMillisUnsafe()
        const held = peekers.get(tool.name)!(args ?? {}, Context.getUnsafe(fiber.context, Caller), trustResolver, nowMs, encoded.get(tool.name)!)
        if (held !== undefined) return Effect.succeed(textOf(held).reply(id, modern, nowMs))
      } catch (defect) {
        return toolsCallDefect(id, defect)
      }
      return Effect.catchDefect(
        Effect.match(runTool(tool, args), {
          onFailure: (error) =>
            modern
              ? reply200(JsonRpc.success(id, toolErrorResult(toProblemDocument(error._tag === "InvalidArguments" ? error.problem : error))))
              : reply200(JsonRpc.failure(id, errorObject(legacyToolError(tool.name, error)))),
          onSuccess: (result) => textOf(result).reply(id, modern, clock.currentTimeMillisUnsafe())
        }),
        (defect) => toolsCallDefect(id, defect)
      )
    })
  }

  const request = (method: string, params: JsonRpc.Params | undefined): Effect.Effect<unknown, JsonRpc.RpcFailure, Caller> => {
    switch (method) {
      case "initialize":
        return Effect.map(decodeParams(method, InitializeParams, params), ({ protocolVersion }) => ({
          protocolVersion: Era.negotiateProtocolVersion(protocolVersion),
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

  /**
   * The methods of revision 2026-07-28 for a tools server besides tools/call (toolsCall answers it, in
   * `answer`). `initialize` and `ping` are gone from it; `subscriptions/listen` is not offered (docs/API.md says why), so it is an unknown method like any other.
   */
  const modernRequest = (method: string): Effect.Effect<unknown, JsonRpc.RpcFailure, Caller> => {
    switch (method) {
      case "server/discover":
        return Effect.succeed(discovery)
      case "tools/list":
        return Effect.succeed(modernToolList)
      default:
        return Effect.fail(JsonRpc.methodNotFound(method))
    }
  }

  const logged = <A, R>(method: string, effect: Effect.Effect<A, JsonRpc.RpcFailure, R>) =>
    effect.pipe(Effect.tapDefect((defect) => Effect.logError(`MCP ${method.slice(0, 100)} failed`, defect)))

  const legacyHandlers: JsonRpc.Handlers<Caller> = {
    request: (method, params) => logged(method, request(method, params)),
    // Stateless: notifications/initialized, cancelled and the rest change nothing here.
    notification: () => Effect.void
  }

  /** A 2026-07-28 request → its reply: -32601 answers HTTP 404 (the revision's rule), every other answer 200. */
  const answerModern = (routed: Extract<Era.Route, { _tag: "Modern" }>): Effect.Effect<JsonRpc.Reply, never, Caller> =>
    Effect.map(
      JsonRpc.answerMessage({ _tag: "Request", id: routed.id, method: routed.method, params: routed.params }, {
        request: (method) => logged(method, modernRequest(method)),
        notification: () => Effect.void
      }),
      (response): JsonRpc.Reply => ({
        _tag: "Answer",
        status: response !== undefined && "error" in response && response.error.code === JsonRpc.ErrorCode.MethodNotFound ? 404 : 200,
        body: JsonRpc.encodeResponse(response!)
      })
    )

  /**
   * One POST body and its headers → the reply; defects are logged here and answered -32603 with no
   * detail. The headers matter only to the era rules (Era.ts): a 2025 request is answered exactly as
   * before this server spoke 2026-07-28. `Mcp-Session-Id` and `Last-Event-ID` are never read.
   */
  const answer = (body: string, headers: Era.Headers = {}): Effect.Effect<JsonRpc.Reply, never, Caller> => {
    const envelope = JsonRpc.parse(body, limitsFor(body))
    const routed = Era.route(envelope, headers)
    switch (routed._tag) {
      case "Legacy":
        return envelope._tag === "Single" && envelope.message._tag === "Request" && envelope.message.method === "tools/call"
          ? toolsCall(envelope.message.id, envelope.message.params, false)
          : JsonRpc.answerEnvelope(envelope, legacyHandlers)
      case "ModernNotification":
        return Effect.succeed({ _tag: "Accepted" })
      case "Refused":
        return Effect.succeed({ _tag: "Answer", status: routed.status, body: JsonRpc.encodeResponse(routed.response) })
      case "Modern":
        return routed.method === "tools/call" ? toolsCall(routed.id, routed.params, true) : answerModern(routed)
    }
  }

  // `answer` stays a plain function, as the other hot paths' methods do (docs/ARCHITECTURE.md, "Services"):
  // Effect.fn's span and the two stack captures it makes per call cost more than the rest of a tools/call's own work.
  return { answer, toolList, transportProblem: rememberedTransportProblem() } satisfies McpShape
})

/**
 * MCP over JSON-RPC, statelessly in both eras (no session: every POST stands alone). The 2025 revisions:
 * initialize, ping, tools/list and tools/call (tools/call needs no earlier initialize). Revision
 * 2026-07-28: server/discover, tools/list and tools/call with per-request metadata. Tools run as the
 * calling API key (`Caller`).
 */
export class Mcp extends Context.Service<Mcp, McpShape>()("pv/Mcp", { make }) {
  static readonly layerNoDeps = Layer.effect(this, make)
  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([TrustResolver.layer, Determinations.layer, Receipts.layer, Subscriptions.layer])
  )
}
