import { Effect, Option } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { methodNotAllowedAnswer, problemAnswer } from "../api/Problems.js"
import { Unauthorized } from "../domain/Problem.js"
import { AppConfig } from "../platform/Config.js"
import { RequestId } from "../observability/RequestRecord.js"
import { MetricsPath, Telemetry } from "../observability/Telemetry.js"
import { RequestIdAttribute } from "../observability/Tracing.js"

/**
 * Runs inside the router, where `HttpRouter.RouteContext` names the matched route: its pattern goes to
 * the request's record (metrics and log line), before any middleware of the route (authentication
 * included) can fail. With tracing on, the request id is also put on the request's server span and on
 * every span its handler creates (SQL statements included).
 */
const observeRoute = (traced: boolean) =>
<E, R>(
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpRouter.RouteContext> =>
  Effect.flatMap(RequestId, (record) => {
    if (record === undefined) return handler
    return Effect.flatMap(HttpRouter.RouteContext, (context) => {
      record.route = context.route.path
      if (!traced) return handler
      return Effect.andThen(
        Effect.annotateCurrentSpan(RequestIdAttribute, record.id),
        Effect.annotateSpans(handler, RequestIdAttribute, record.id)
      )
    })
  })

/** Router middleware (per route, so it runs after routing, where the matched route is known). */
export const ObserveRoutes = HttpRouter.middleware(
  Effect.map(AppConfig, (config) => observeRoute(Option.isSome(config.otlpEndpoint)))
)

/**
 * Observes every route added by the layers it is provided to: `Layer.provide(ObserveRoutesLive)` on each
 * layer that adds routes (`HttpApiBuilder.layer(Api, …)` with its OpenAPI document, the docs, the web
 * page, /metrics). A route middleware wraps the routes registered where it is in context; merging it
 * beside them does nothing.
 */
export const ObserveRoutesLive = ObserveRoutes.layer

/**
 * GET (and HEAD) /metrics on the service's own port: the Prometheus exposition (Telemetry), behind
 * PV_METRICS_TOKEN as a bearer token when it is set. Any other method is 405 with `Allow`.
 */
const serveMetrics = (telemetry: Telemetry["Service"]) => (request: HttpServerRequest.HttpServerRequest) => {
  if (request.method !== "GET" && request.method !== "HEAD") {
    return methodNotAllowedAnswer("The metrics endpoint takes GET only.", "GET, HEAD")
  }
  if (!telemetry.metricsAuthorized(request.headers.authorization)) {
    return Effect.map(
      problemAnswer(new Unauthorized({ detail: "The metrics endpoint requires its bearer token." })),
      (response) => HttpServerResponse.setHeader(response, "www-authenticate", `Bearer realm="pv", error="invalid_token"`)
    )
  }
  return Effect.map(telemetry.exposition, (text) => HttpServerResponse.text(text, { contentType: "text/plain; version=0.0.4; charset=utf-8" }))
}

/** The /metrics route, for the service and the witness (provide ObserveRoutesLive to it). */
export const MetricsRouteLive = HttpRouter.use((router) =>
  Effect.flatMap(Telemetry, (telemetry) => router.add("*", MetricsPath, serveMetrics(telemetry))))
