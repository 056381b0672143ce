import { Cause, Context, Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import { problemResponse } from "../api/Problems.js"
import { BadRequest, Internal, isProblemError, MalformedJson, NotFound, OriginNotAllowed, type ProblemError, Unauthorized } from "../domain/Problem.js"
import { makeRequestRecord, problemInstance, RequestId, RequestIdHeader, requestIdFrom, type RequestRecord } from "../observability/RequestRecord.js"
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

/** The answer with the headers every answer to the request carries (`record.headers`) that it does not set itself. */
const withRecordHeaders = (response: HttpServerResponse.HttpServerResponse, record: RequestRecord): HttpServerResponse.HttpServerResponse => {
  let missing: Record<string, string> | undefined
  for (const name in record.headers) {
    if (response.headers[name] === undefined) (missing ??= {})[name] = record.headers[name]!
  }
  return missing === undefined ? response : HttpServerResponse.setHeaders(response, missing)
}

/**
 * The one global router middleware, around every route and requests no route matches. Per request, in
 * this order, synchronously up to the app:
 * - the request's record (`RequestId`, provided by the front door, http/FrontDoor.ts: its id is the client's
 *   `X-Request-Id` when acceptable, else generated); the id goes on every answer and is the `instance` of its problems;
 * - browser origins (http/Cors.ts): preflights answered, a refused origin 403, CORS headers on the answer;
 * - x-pv-internal-token (docs/API.md §3.5) and a request target that is not UTF-8;
 * - unknown routes (404; a method a path lacks is one too) and anything that escaped a route (a defect)
 *   as problem+json: nothing internal leaves in an error body.
 * The headers every answer carries (`X-Request-Id`, CORS, `Vary`, RateLimit) are noted on the record while the
 * request is served and put on the answer once, at the end, where the answer does not set them itself.
 */
export const EdgeLive = HttpRouter.middleware(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const allowed: ReadonlySet<string> = new Set(config.allowedOrigins)
    const internalTokenAccepted = internalTokenRule(config)
    const problemAnswer = (problem: ProblemError, record: RequestRecord) => withRecordHeaders(problemResponse(problem, problemInstance(record.id)), record)
    return (app: App): App =>
      Effect.withFiber((fiber) => {
        const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
        const headers = request.headers
        // Outside the service's own server (no front door) the record is made here.
        const provided = Context.get(fiber.context, RequestId)
        const record = provided ?? makeRequestRecord(requestIdFrom(headers[RequestIdHeader]), performance.now())
        const origin = headers.origin
        if (origin !== undefined) {
          const outcome = originOutcome(allowed, request.method, pathOf(request.url), origin, headers["access-control-request-method"])
          if (outcome._tag === "Refused") {
            record.headers.vary = "Origin"
            return Effect.succeed(problemAnswer(new OriginNotAllowed({ detail: "Requests from this browser origin are not accepted here." }), record))
          }
          if (outcome._tag === "Preflight") return Effect.succeed(withRecordHeaders(HttpServerResponse.empty({ status: 204, headers: outcome.headers }), record))
          Object.assign(record.headers, outcome.headers)
        }
        if (!internalTokenAccepted(headers["x-pv-internal-token"])) {
          return Effect.succeed(problemAnswer(new Unauthorized({ detail: "The x-pv-internal-token header is not valid." }), record))
        }
        if (!decodesAsUtf8(request.url)) {
          return Effect.succeed(problemAnswer(new BadRequest({ detail: "The request target's percent-encoding is not UTF-8." }), record))
        }
        const answered = Effect.map(
          Effect.catchCause(app, (cause) =>
            Option.match(Cause.findErrorOption(cause), {
              onNone: () => Effect.map(defectProblem(cause), (problem) => problemResponse(problem, problemInstance(record.id))),
              onSome: (error) => Effect.succeed(problemResponse(classify(error), problemInstance(record.id)))
            })),
          (response) => withRecordHeaders(response, record)
        )
        return provided === undefined ? Effect.provideService(answered, RequestId, record) : answered
      })
  }) as never,
  { global: true }
) as Layer.Layer<never, never, AppConfig | HttpRouter.HttpRouter>
