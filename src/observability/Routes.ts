import { Effect, Option } from "effect"
import { HttpRouter, HttpServerRequest, type HttpServerResponse } from "effect/http"
import { AppConfig } from "../platform/Config.js"
import { recordOf } from "./RequestRecord.js"
import { RequestIdAttribute } from "./Tracing.js"

/**
 * Runs inside the router, where `HttpRouter.RouteContext` names the matched route: its pattern goes to
 * the request's record (metrics and log line), before any middleware of the route (authentication
 * included) can fail. With tracing on, the request id is also put on the request's server span and on
 * every span its handler creates (SQL statements included).
 */
const observeRoute = (traced: boolean) =>
<E, R>(
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest | HttpRouter.RouteContext> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const record = recordOf(request)
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
 * page). A route middleware wraps the routes registered where it is in context; merging it beside them
 * does nothing.
 */
export const ObserveRoutesLive = ObserveRoutes.layer
