import type * as Http from "node:http"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Cause, Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import { announcesBody, problemResponse } from "../api/Problems.js"
import { BadRequest, Internal, isProblemError, MalformedJson, NotFound, OriginNotAllowed, type ProblemError, Unauthorized } from "../domain/Problem.js"
import { problemInstance, RequestId, RequestIdHeader, type RequestRecord } from "../observability/RequestRecord.js"
import { Telemetry } from "../observability/Telemetry.js"
import { AppConfig } from "../platform/Config.js"
import { originOutcome } from "./Cors.js"
import { arrivalRecord } from "./FrontDoor.js"
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
 * - an answer given before a request body was received in full closes the connection (nobody reads the rest);
 * - when the response is done (or its connection closed), its metrics and log line (Telemetry).
 * The answer's own headers (`X-Request-Id`, CORS, `Vary`, `Connection`) are set on the platform's Node
 * response, which it merges into the answer's head: GET /machine is measured per microsecond
 * (docs/PERFORMANCE.md).
 */
export const EdgeLive = HttpRouter.middleware(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const telemetry = yield* Telemetry
    const allowed: ReadonlySet<string> = new Set(config.allowedOrigins)
    const internalTokenAccepted = internalTokenRule(config)
    const problemAnswer = (problem: ProblemError, record: RequestRecord) => problemResponse(problem, problemInstance(record.id))
    return (app: App): App =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const headers = request.headers
        const incoming = NodeHttpServerRequest.toIncomingMessage(request) as Http.IncomingMessage
        const outgoing = NodeHttpServerRequest.toServerResponse(request) as Http.ServerResponse
        // Timed from its arrival at the front door (a request with a body may start later: http/FrontDoor.ts).
        const record = arrivalRecord(headers[RequestIdHeader], outgoing)
        outgoing.on("close", () => telemetry.requestEnded(incoming, outgoing, record))
        // Headers every answer carries go on the Node response now, where the platform's `writeHead` merges
        // them with the answer's own: synchronous, and no copy of the answer per header.
        outgoing.setHeader(RequestIdHeader, record.id)
        const origin = headers.origin
        if (origin !== undefined) {
          const outcome = originOutcome(allowed, request.method, pathOf(request.url), origin, headers["access-control-request-method"])
          if (outcome._tag === "Refused") {
            outgoing.setHeader("vary", "Origin")
            return Effect.succeed(problemAnswer(new OriginNotAllowed({ detail: "Requests from this browser origin are not accepted here." }), record))
          }
          if (outcome._tag === "Preflight") return Effect.succeed(HttpServerResponse.empty({ status: 204, headers: outcome.headers }))
          for (const name in outcome.headers) outgoing.setHeader(name, outcome.headers[name]!)
        }
        if (!internalTokenAccepted(headers["x-pv-internal-token"])) {
          return Effect.succeed(problemAnswer(new Unauthorized({ detail: "The x-pv-internal-token header is not valid." }), record))
        }
        if (!decodesAsUtf8(request.url)) {
          return Effect.succeed(problemAnswer(new BadRequest({ detail: "The request target's percent-encoding is not UTF-8." }), record))
        }
        const answered = Effect.provideService(
          Effect.catchCause(app, (cause) =>
            Effect.map(
              Option.match(Cause.findErrorOption(cause), {
                onNone: () => defectProblem(cause),
                onSome: (error) => Effect.succeed(classify(error))
              }),
              (problem) => problemAnswer(problem, record)
            )),
          RequestId,
          record
        )
        if (!announcesBody(headers)) return answered
        // An answer given before the body was received in full closes the connection (nobody reads the rest).
        return Effect.map(answered, (response) => {
          if (!incoming.complete) outgoing.setHeader("connection", "close")
          return response
        })
      })
  }) as never,
  { global: true }
) as Layer.Layer<never, never, AppConfig | Telemetry | HttpRouter.HttpRouter>
