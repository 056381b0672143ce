import { Effect, Layer, Option } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { groupApi } from "../api/GroupApi.js"
import { McpApi } from "./Api.js"
import { MaxBodyBytes, methodNotAllowedAnswer } from "../api/Problems.js"
import { type NotAcceptable, PayloadTooLarge, type UnsupportedMediaType } from "../domain/Problem.js"
import { withMiddlewaresOnly } from "../http/GroupContext.js"
import { readBoundedBytesThen } from "../http/RequestGuard.js"
import type * as JsonRpc from "./JsonRpc.js"
import { Mcp } from "./Mcp.js"

/** Text that is certainly not JSON, standing in for a body that could not be decoded at all. */
const notJson = ""

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

const tooLarge = () => new PayloadTooLarge({ detail: `Request bodies are limited to ${MaxBodyBytes} bytes.` })

/**
 * The body as text, at most MaxBodyBytes (413 beyond), by the service's one body reader. Bytes that are
 * not UTF-8 are not JSON: they become text that JSON-RPC answers with its parse error (-32700), never
 * silently replaced characters.
 */
const bodyText = (bytes: Buffer): string => {
  try {
    return strictUtf8.decode(bytes)
  } catch {
    return notJson
  }
}

const methodNotAllowed = methodNotAllowedAnswer("This MCP endpoint takes POST only: it offers no SSE stream and no sessions.", "POST")

const accepted = HttpServerResponse.empty({ status: 202 })

/** Raw handler (built with its middlewares only: see http/GroupContext.ts): the body is read as text so the JSON-RPC codec, not HttpApi, answers malformed JSON. */
export const McpHttpLive = Layer.unwrap(Effect.gen(function*() {
  const mcp = yield* Mcp
  // Responses are immutable values: when the Mcp service hands over the very reply it gave last time (a tool
  // result's kept reply, ResultText in Mcp.ts), the response built for it then is answered again, as GET
  // /machine answers its cached document's; the per-request headers (request id, RateLimit, CORS) are set on
  // each request's Node response, which the platform merges with the answer's own when it writes the head.
  let lastReply: JsonRpc.Reply = { _tag: "Accepted" }
  let lastResponse = accepted
  const responseOf = (reply: JsonRpc.Reply): HttpServerResponse.HttpServerResponse => {
    if (reply === lastReply) return lastResponse
    const response = reply._tag === "Accepted"
      ? accepted
      : HttpServerResponse.text(reply.body, { status: reply.status, contentType: "application/json" })
    lastReply = reply
    lastResponse = response
    return response
  }
  return withMiddlewaresOnly(HttpApiBuilder.group(groupApi(McpApi), "mcp", (handlers) =>
    handlers
      // mcp:call was checked by ApiKeyAuth (the endpoint's RequiredScope), before the transport rules here.
      .handleRaw("call", ({ request }) => {
        const refused: NotAcceptable | UnsupportedMediaType | undefined = Option.getOrUndefined(mcp.transportProblem(request.headers))
        if (refused !== undefined) return Effect.fail(refused)
        return readBoundedBytesThen(request, tooLarge, (bytes) => Effect.map(mcp.answer(bodyText(bytes), request.headers), responseOf))
      })
      .handle("stream", () => methodNotAllowed)
      .handle("endSession", () => methodNotAllowed)))
}))
