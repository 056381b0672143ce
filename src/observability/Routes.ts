import { HttpApiBuilder, HttpRouter, HttpServer, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { Context, Effect, Layer, Option } from "effect"
import { AppConfig } from "../platform/Config.js"
import { recordOf } from "./RequestRecord.js"
import { RequestIdAttribute } from "./Tracing.js"

type Handler = Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, unknown>

/**
 * Runs inside the router, where `HttpRouter.RouteContext` names the matched route: its pattern goes to
 * the request's record (metrics and log line), before any middleware of the route (authentication
 * included) can fail. With tracing on, the request id is also put on the request's server span and on
 * every span its handler creates (SQL statements included).
 */
const observeRoute = (traced: boolean) => (handler: Handler): Handler =>
  Effect.withFiberRuntime((fiber) => {
    const context = fiber.currentContext
    const request = Context.unsafeGet(context, HttpServerRequest.HttpServerRequest)
    const record = recordOf(request)
    if (record === undefined) return handler
    record.route = Context.unsafeGet(context, HttpRouter.RouteContext).route.path
    if (!traced) return handler
    return Effect.zipRight(
      Effect.annotateCurrentSpan(RequestIdAttribute, record.id),
      Effect.annotateSpans(handler, RequestIdAttribute, record.id)
    )
  })

/** The API's router with every route (API endpoints, docs, the page, the OpenAPI document) observed. */
const observedRouter = (traced: boolean) =>
  Layer.effect(
    HttpApiBuilder.Router,
    Effect.map(HttpApiBuilder.Router, (service) => ({
      ...service,
      router: Effect.map(service.router, (router) => HttpRouter.use(router, observeRoute(traced) as never))
    }))
  ).pipe(Layer.provide(HttpApiBuilder.Router.Live))

/**
 * `HttpApiBuilder.serve()` with observed routes: the same app (built by `HttpApiBuilder.httpApp` from the
 * routes every group and docs layer registers on `HttpApiBuilder.Router`), served by the HttpServer.
 */
export const ServeObservedLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    HttpApiBuilder.httpApp.pipe(
      Effect.map((app) => HttpServer.serve(app)),
      Layer.unwrapEffect,
      Layer.provide(observedRouter(Option.isSome(config.otlpEndpoint))),
      Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer])
    ))
)
