import type * as Http from "node:http"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Cause, Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import { problemResponse } from "../api/Problems.js"
import { BadRequest, Internal, isProblemError, MalformedJson, NotFound, OriginNotAllowed, type ProblemError, Unauthorized } from "../domain/Problem.js"
import { makeRequestRecord, problemInstance, RequestId, RequestIdHeader, requestIdFrom } from "../observability/RequestRecord.js"
import { Telemetry } from "../observability/Telemetry.js"
import { AppConfig } from "../platform/Config.js"
import { originOutcome } from "./Cors.js"
import { decodesAsUtf8, defectProblem, internalTokenRule, schemaProblem } from "./RequestGuard.js"

/** Failures that reach the router: unknown routes, unreadable requests, anything else is ours. */
const classify = (error: unknown): ProblemError => {
  if (isProblemError(error)) return error
  if (HttpApiError.HttpApiSchemaError.is(error)) return schemaProblem(error)
  const reason = typeof error === "object" && error !== null ? (error as { reason?: { _tag?: string } }).reason?._tag : undefined
  switch (reason) {
    case "RouteNotFound":
      return new NotFound({ detail: "No such resource." })
    case "RequestParseError":
      return new MalformedJson({ detail: "The request body could not be read." })
  }
  return new Internal({ detail: "The service failed to handle this request." })
}

const pathOf = (url: string) => {
  const q = url.indexOf("?")
  return q === -1 ? url : url.slice(0, q)
}

type App = Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, HttpServerRequest.HttpServerRequest>

/**
 * The one global router middleware, around every route and requests no route matches. Per request, in
 * this order, synchronously up to the app:
 * - the request id (the client's `X-Request-Id` when acceptable, else generated) and its record, provided
 *   to the whole request as `RequestId`; the id goes on every answer and is the `instance` of its problems;
 * - browser origins (http/Cors.ts): preflights answered, a refused origin 403, CORS headers on the answer;
 * - x-pv-internal-token (docs/API.md §3.5) and a request target that is not UTF-8;
 * - unknown routes (404; a method a path lacks is one too) and anything that escaped a route (a defect)
 *   as problem+json: nothing internal leaves in an error body;
 * - an answer given before a request body was read in full closes the connection (nobody reads the rest);
 * - when the response is done (or its connection closed), its metrics and log line (Telemetry).
 */
export const EdgeLive = HttpRouter.middleware(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const telemetry = yield* Telemetry
    const allowed: ReadonlySet<string> = new Set(config.allowedOrigins)
    const internalTokenAccepted = internalTokenRule(config)
    return (app: App): App =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const record = makeRequestRecord(requestIdFrom(request.headers[RequestIdHeader]), performance.now())
        const incoming = NodeHttpServerRequest.toIncomingMessage(request) as Http.IncomingMessage
        const outgoing = NodeHttpServerRequest.toServerResponse(request) as Http.ServerResponse
        outgoing.on("close", () => telemetry.requestEnded(incoming, outgoing, record))
        const headers = request.headers
        const hasBody = headers["transfer-encoding"] !== undefined || Number(headers["content-length"] ?? "0") > 0
        let cors: Readonly<Record<string, string>> | undefined
        const answer = (response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse => {
          let answered = HttpServerResponse.setHeader(response, RequestIdHeader, record.id)
          if (cors !== undefined) answered = HttpServerResponse.setHeaders(answered, cors)
          return hasBody && !incoming.complete ? HttpServerResponse.setHeader(answered, "connection", "close") : answered
        }
        const refuse = (problem: ProblemError) => Effect.succeed(answer(problemResponse(problem, problemInstance(record.id))))
        const origin = headers.origin
        if (origin !== undefined) {
          const outcome = originOutcome(allowed, request.method, pathOf(request.url), origin, headers["access-control-request-method"])
          if (outcome._tag === "Refused") {
            return Effect.succeed(answer(HttpServerResponse.setHeader(
              problemResponse(new OriginNotAllowed({ detail: "Requests from this browser origin are not accepted here." }), problemInstance(record.id)),
              "vary",
              "Origin"
            )))
          }
          if (outcome._tag === "Preflight") return Effect.succeed(answer(HttpServerResponse.empty({ status: 204, headers: outcome.headers })))
          cors = outcome.headers
        }
        if (!internalTokenAccepted(headers["x-pv-internal-token"])) {
          return refuse(new Unauthorized({ detail: "The x-pv-internal-token header is not valid." }))
        }
        if (!decodesAsUtf8(request.url)) return refuse(new BadRequest({ detail: "The request target's percent-encoding is not UTF-8." }))
        return app.pipe(
          Effect.catchCause((cause) =>
            Effect.map(
              Option.match(Cause.findErrorOption(cause), {
                onNone: () => defectProblem(cause),
                onSome: (error) => Effect.succeed(classify(error))
              }),
              (problem) => problemResponse(problem, problemInstance(record.id))
            )),
          Effect.map(answer),
          Effect.provideService(RequestId, record)
        )
      })
  }) as never,
  { global: true }
) as Layer.Layer<never, never, AppConfig | Telemetry | HttpRouter.HttpRouter>
