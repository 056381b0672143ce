import { Data, Effect, Schema } from "effect"
import { duplicateMemberOf } from "../domain/Json.js"
import { JsonRpcResponse } from "./Api.js"

/**
 * JSON-RPC 2.0 (https://www.jsonrpc.org/specification), the service's own codec: parse a POST body,
 * classify every message, run requests through a handler and encode the answer. No I/O here; the
 * transport (`Http.ts`) turns a `Reply` into an HTTP response.
 */

export const JsonRpcVersion = "2.0" as const

/** Ids are echoed unchanged: a string stays that string, a number that number (0 included). */
export type RequestId = string | number

export type Params = Readonly<Record<string, unknown>> | ReadonlyArray<unknown>

export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** Implementation-defined server error: a tool's domain failure, with the problem document as data (2025 revisions). */
  ToolFailure: -32000,
  /** MCP 2026-07-28: the HTTP headers do not match the body, or a required header is missing or malformed. */
  HeaderMismatch: -32020,
  /** MCP 2026-07-28: the request's protocol version is not served here; data lists the supported ones. */
  UnsupportedProtocolVersion: -32022
} as const

export interface ErrorObject {
  readonly code: number
  readonly message: string
  readonly data?: unknown
}

export type Response =
  | { readonly jsonrpc: typeof JsonRpcVersion; readonly id: RequestId | null; readonly result: unknown }
  | { readonly jsonrpc: typeof JsonRpcVersion; readonly id: RequestId | null; readonly error: ErrorObject }

/** How a handler refuses a request; anything else that goes wrong becomes -32603. */
export class RpcFailure extends Data.TaggedError("RpcFailure")<ErrorObject> {}

/** One element of a POST body, classified. */
export type Message =
  | { readonly _tag: "Request"; readonly id: RequestId; readonly method: string; readonly params: Params | undefined }
  | { readonly _tag: "Notification"; readonly method: string; readonly params: Params | undefined }
  /** A response the client sends (to a server request): accepted and never answered. */
  | { readonly _tag: "ClientResponse" }
  /** Not a JSON-RPC message; answered with -32600 and the id when one could be read. */
  | { readonly _tag: "Invalid"; readonly id: RequestId | null; readonly detail: string }

/** A whole POST body, classified. */
export type Envelope =
  /** Not JSON, or JSON that repeats a member name (`duplicate` is the JSON pointer of the second occurrence). */
  | { readonly _tag: "Unparseable"; readonly duplicate?: string }
  | { readonly _tag: "Single"; readonly message: Message }
  | { readonly _tag: "Batch"; readonly messages: ReadonlyArray<Message> }
  | { readonly _tag: "EmptyBatch" }

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const has = (record: Record<string, unknown>, key: string) => Object.hasOwn(record, key)

/** JSON-RPC allows null ids, MCP does not: a request id is a string or a finite number. */
export const isRequestId = (u: unknown): u is RequestId =>
  typeof u === "string" || (typeof u === "number" && Number.isFinite(u))

const isParams = (u: unknown): u is Params => typeof u === "object" && u !== null

const invalid = (id: RequestId | null, detail: string): Message => ({ _tag: "Invalid", id, detail })

/** Any JSON value → the message it is. Total: never throws. */
export const classify = (value: unknown): Message => {
  if (!isRecord(value)) return invalid(null, "A JSON-RPC message is an object.")
  const id = has(value, "id") && isRequestId(value.id) ? value.id : null
  if (value.jsonrpc !== JsonRpcVersion) return invalid(id, "jsonrpc must be exactly \"2.0\".")
  if (has(value, "method")) {
    if (typeof value.method !== "string") return invalid(id, "method must be a string.")
    const params = value.params
    if (has(value, "params") && !isParams(params)) return invalid(id, "params must be an object or an array.")
    const checkedParams = has(value, "params") ? params as Params : undefined
    if (!has(value, "id")) return { _tag: "Notification", method: value.method, params: checkedParams }
    if (!isRequestId(value.id)) return invalid(null, "id must be a string or a number.")
    return { _tag: "Request", id: value.id, method: value.method, params: checkedParams }
  }
  const isReply = has(value, "result") !== has(value, "error") &&
    has(value, "id") && (value.id === null || isRequestId(value.id))
  return isReply
    ? { _tag: "ClientResponse" }
    : invalid(id, "A message needs a method (request or notification), or an id with a result or an error (response).")
}

export interface Limits {
  /** A message this predicate flags (e.g. nested too deeply to be worth decoding) is an invalid request. */
  readonly refuse?: (message: unknown) => string | undefined
}

const classifyWithin = (limits: Limits) => (value: unknown): Message => {
  const refused = limits.refuse?.(value)
  return refused === undefined
    ? classify(value)
    : invalid(isRecord(value) && has(value, "id") && isRequestId(value.id) ? value.id : null, refused)
}

/**
 * The POST body → its envelope. An array is a batch; an empty array is an invalid request. A body that
 * repeats a member name in one object, at any depth, is refused like malformed JSON (I-JSON, RFC 7493):
 * parsers disagree on which value wins, so a gateway and this server could read different requests.
 */
export const parse = (text: string, limits: Limits = {}): Envelope => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { _tag: "Unparseable" }
  }
  const duplicate = duplicateMemberOf(text, value)
  if (duplicate !== undefined) return { _tag: "Unparseable", duplicate }
  const classifyOne = classifyWithin(limits)
  if (!Array.isArray(value)) return { _tag: "Single", message: classifyOne(value) }
  return value.length === 0 ? { _tag: "EmptyBatch" } : { _tag: "Batch", messages: value.map(classifyOne) }
}

export const success = (id: RequestId | null, result: unknown): Response => ({ jsonrpc: JsonRpcVersion, id, result })

export const failure = (id: RequestId | null, error: ErrorObject): Response => ({ jsonrpc: JsonRpcVersion, id, error })

export const parseError = failure(null, { code: ErrorCode.ParseError, message: "Parse error: the body is not valid JSON." })

/** -32700 for a repeated member name; `data.pointer` is the JSON pointer of the repeated member. */
export const duplicateMemberError = (pointer: string): Response =>
  failure(null, {
    code: ErrorCode.ParseError,
    message: `Parse error: the body repeats the member name at ${JSON.stringify(pointer).slice(0, 200)} (I-JSON, RFC 7493).`,
    data: { pointer }
  })

/** The reply to a body that is not (acceptable) JSON. */
export const unparseable = (envelope: { readonly duplicate?: string }): Reply => ({
  _tag: "Answer",
  status: 400,
  body: encodeResponse(envelope.duplicate === undefined ? parseError : duplicateMemberError(envelope.duplicate))
})

export const invalidRequest = (id: RequestId | null, detail: string): Response =>
  failure(id, { code: ErrorCode.InvalidRequest, message: `Invalid Request: ${detail}` })

export const methodNotFound = (method: string): RpcFailure =>
  new RpcFailure({ code: ErrorCode.MethodNotFound, message: `Method not found: ${method.slice(0, 100)}` })

export const internalError = (id: RequestId | null): Response =>
  failure(id, { code: ErrorCode.InternalError, message: "Internal error." })

/**
 * What the transport sends: JSON-RPC text with a status, or 202 with no body.
 */
export type Reply =
  | { readonly _tag: "Answer"; readonly status: 200 | 400 | 404; readonly body: string }
  | { readonly _tag: "Accepted" }

export interface Handlers<R> {
  /** Answers one request; fail with `RpcFailure` to send a JSON-RPC error. */
  readonly request: (method: string, params: Params | undefined) => Effect.Effect<unknown, RpcFailure, R>
  /** Receives one notification; its outcome is never sent anywhere. */
  readonly notification: (method: string, params: Params | undefined) => Effect.Effect<void, never, R>
}

/**
 * A result already serialised by whoever produced it (a tool result built once per immutable value), so
 * the response is assembled around it instead of serialising the same document again.
 */
export class PreEncoded {
  constructor(readonly json: string) {}
}

/**
 * Every envelope goes through the endpoint's declared success schema (src/mcp/Api.ts, JsonRpcResponse).
 * `result` and `error.data` are Unknown there: the plain codec hands them to JSON.stringify unchanged (its
 * JSON codec, which HttpApi would use, also refuses undefined members that JSON.stringify drops). Tool
 * results went through their tool's outputSchema already (Tools.ts).
 */
const encodeEnvelope = Schema.encodeSync(JsonRpcResponse, { onExcessProperty: "error" })

/** A response as JSON text; a result that cannot be serialized becomes -32603 for that id. */
export const encodeResponse = (response: Response): string => {
  try {
    if ("result" in response && response.result instanceof PreEncoded) {
      // The result is already JSON text, and the rest is the version and an id `classify` checked (a string or
      // a finite number, as the envelope schema's Id): the envelope is written around the text directly.
      return `{"jsonrpc":"2.0","id":${JSON.stringify(response.id)},"result":${response.result.json}}`
    }
    const text = JSON.stringify(encodeEnvelope(response))
    if (typeof text === "string") return text
  } catch {
    // fall through
  }
  return JSON.stringify(encodeEnvelope(internalError(response.id)))
}

/**
 * A success response around a result already held as JSON text: the envelope `encodeResponse` writes
 * around a `PreEncoded` result. A tool result that is the same for many calls is kept as text once.
 */
export const successText = (id: RequestId, resultJson: string): string =>
  `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${resultJson}}`

/** One message → its response, or none for notifications and client responses. Never fails. */
export const answerMessage = <R>(message: Message, handlers: Handlers<R>): Effect.Effect<Response | undefined, never, R> => {
  switch (message._tag) {
    case "Invalid":
      return Effect.succeed(invalidRequest(message.id, message.detail))
    case "ClientResponse":
      return Effect.succeed(undefined)
    case "Notification":
      return handlers.notification(message.method, message.params).pipe(
        Effect.catchDefect(() => Effect.void),
        Effect.as(undefined)
      )
    case "Request":
      return handlers.request(message.method, message.params).pipe(
        Effect.map((result) => success(message.id, result)),
        Effect.catchTag("RpcFailure", ({ code, message: text, data }) =>
          Effect.succeed(failure(message.id, data === undefined ? { code, message: text } : { code, message: text, data }))),
        Effect.catchDefect(() => Effect.succeed(internalError(message.id)))
      )
  }
}

/**
 * A POST body → the reply. Whole-body problems (unparseable JSON, an empty batch, a single message that
 * is not JSON-RPC) answer HTTP 400 with the JSON-RPC error; a request answers 200; a body holding only
 * notifications and responses is accepted with 202 and no body. Batch elements run in order.
 */
export const answer = <R>(text: string, handlers: Handlers<R>, limits: Limits = {}): Effect.Effect<Reply, never, R> =>
  answerEnvelope(parse(text, limits), handlers)

/** `answer` for a body already parsed (the MCP layer looks at the envelope first to pick the protocol era). */
export const answerEnvelope = <R>(envelope: Envelope, handlers: Handlers<R>): Effect.Effect<Reply, never, R> => {
  switch (envelope._tag) {
    case "Unparseable":
      return Effect.succeed(unparseable(envelope))
    case "EmptyBatch":
      return Effect.succeed({
        _tag: "Answer",
        status: 400,
        body: encodeResponse(invalidRequest(null, "an empty batch holds no message."))
      })
    case "Single":
      return Effect.map(answerMessage(envelope.message, handlers), (response): Reply =>
        response === undefined
          ? { _tag: "Accepted" }
          : { _tag: "Answer", status: envelope.message._tag === "Invalid" ? 400 : 200, body: encodeResponse(response) })
    case "Batch":
      return Effect.map(Effect.forEach(envelope.messages, (message) => answerMessage(message, handlers)), (responses): Reply => {
        const sent = responses.filter((response): response is Response => response !== undefined)
        return sent.length === 0
          ? { _tag: "Accepted" }
          : { _tag: "Answer", status: 200, body: `[${sent.map(encodeResponse).join(",")}]` }
      })
  }
}
