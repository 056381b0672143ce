import { Effect, Layer, Option } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.js"
import { MaxBodyBytes, problemAnswer } from "../api/Problems.js"
import { MethodNotAllowed, type NotAcceptable, PayloadTooLarge, type UnsupportedMediaType } from "../domain/Problem.js"
import { withMiddlewaresOnly } from "../http/GroupContext.js"
import { readBoundedBytes } from "../http/RequestGuard.js"
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
const readBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.map(readBoundedBytes(request, tooLarge), (bytes) => {
    try {
      return strictUtf8.decode(bytes)
    } catch {
      return notJson
    }
  })

const methodNotAllowed = Effect.map(
  problemAnswer(new MethodNotAllowed({ detail: "This MCP endpoint takes POST only: it offers no SSE stream and no sessions." })),
  (response) => HttpServerResponse.setHeader(response, "allow", "POST")
)

/** Raw handler (built with its middlewares only: see http/GroupContext.ts): the body is read as text so the JSON-RPC codec, not HttpApi, answers malformed JSON. */
export const McpHttpLive = Layer.unwrap(Effect.gen(function*() {
  const mcp = yield* Mcp
  return withMiddlewaresOnly(HttpApiBuilder.group(Api, "mcp", (handlers) =>
    handlers
      // mcp:call was checked by ApiKeyAuth (the endpoint's RequiredScope), before the transport rules here.
      .handleRaw("call", ({ request }) => {
        const refused: NotAcceptable | UnsupportedMediaType | undefined = Option.getOrUndefined(mcp.transportProblem(request.headers))
        if (refused !== undefined) return Effect.fail(refused)
        return Effect.flatMap(readBody(request), (body) =>
          Effect.map(mcp.answer(body, request.headers), (reply) =>
            reply._tag === "Accepted"
              ? HttpServerResponse.empty({ status: 202 })
              : HttpServerResponse.text(reply.body, { status: reply.status, contentType: "application/json" })))
      })
      .handle("stream", () => methodNotAllowed)
      .handle("endSession", () => methodNotAllowed)))
}))
