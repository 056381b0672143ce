import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Option } from "effect"
import { requireScope } from "../access/ApiKeys.js"
import { MethodNotAllowed, PayloadTooLarge } from "../domain/Problem.js"
import { Api } from "../http/Api.js"
import { instanceOf, MaxBodyBytes, problemResponse } from "../http/Problems.js"
import { Mcp, transportProblem } from "./Mcp.js"

/** Text that is certainly not JSON, standing in for a body that could not be decoded at all. */
const notJson = ""

const methodNotAllowed = Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
  HttpServerResponse.setHeader(
    problemResponse(new MethodNotAllowed({ detail: "This MCP endpoint takes POST only: it offers no SSE stream and no sessions." }), instanceOf(request)),
    "allow",
    "POST"
  ))

/** Raw handler: the body is read as text so the JSON-RPC codec, not HttpApi, answers malformed JSON. */
export const McpHttpLive = HttpApiBuilder.group(Api, "mcp", (handlers) =>
  Effect.gen(function*() {
    const mcp = yield* Mcp
    return handlers
      .handleRaw("call", ({ request }) =>
        Effect.gen(function*() {
          yield* requireScope("mcp:call")
          const refused = transportProblem(request.headers)
          if (Option.isSome(refused)) return yield* Effect.fail(refused.value)
          const body = yield* request.text.pipe(
            HttpServerRequest.withMaxBodySize(Option.some(MaxBodyBytes)),
            // Bytes that are not UTF-8 are not JSON: JSON-RPC answers them with its parse error (-32700).
            Effect.catchIf((error: unknown) => (error as { _tag?: string })._tag === "MalformedJson", () => Effect.succeed(notJson)),
            Effect.mapError(() => new PayloadTooLarge({ detail: `Request bodies are limited to ${MaxBodyBytes} bytes.` }))
          )
          const reply = yield* mcp.answer(body)
          return reply._tag === "Accepted"
            ? HttpServerResponse.empty({ status: 202 })
            : HttpServerResponse.text(reply.body, { status: reply.status, contentType: "application/json" })
        }))
      .handle("stream", () => methodNotAllowed)
      .handle("endSession", () => methodNotAllowed)
  }))
