import { Layer } from "effect"
import { HttpRouter } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { ApiKeyAuthLive, OperatorAuthLive } from "../access/AuthLive.js"
import { ApiKeysHttpLive } from "../access/Http.js"
import { Api } from "./Api.js"
import { EventsHttpLive, EventStreamHeadLive } from "../events/Http.js"
import { EventPages } from "../events/EventPages.js"
import { LiveStreams } from "../events/LiveStream.js"
import { SubscriptionsHttpLive } from "../webhooks/SubscriptionsHttp.js"
import { LogHttpLive } from "../log/Http.js"
import { McpHttpLive } from "../mcp/Http.js"
import { MetricsRouteLive, ObserveRoutesLive } from "../http/Routes.js"
import { ReceiptsHttpLive } from "../receipts/Http.js"
import { DeterminationsHttpLive } from "../trust/DeterminationsHttp.js"
import { TrustHttpLive } from "../trust/Http.js"
import { WebLive } from "../web/Web.js"
import { WebhooksHttpLive } from "../webhooks/Http.js"
import { DocsLive } from "./Docs.js"
import { EdgeLive } from "../http/Edge.js"
import { RequestGuardLive } from "../http/RequestGuard.js"
import { SystemHttpLive } from "../http/SystemHttp.js"

/** Every group's handlers, with the middlewares their endpoints declare (authentication, RequestGuard). */
const HandlersLive = Layer.mergeAll(
  SystemHttpLive,
  TrustHttpLive,
  DeterminationsHttpLive,
  ApiKeysHttpLive,
  ReceiptsHttpLive,
  McpHttpLive,
  EventsHttpLive,
  SubscriptionsHttpLive,
  WebhooksHttpLive,
  LogHttpLive
).pipe(Layer.provide([ApiKeyAuthLive, OperatorAuthLive, RequestGuardLive, LiveStreams.layer, EventPages.layer]))

/**
 * The routes: the HttpApi (with /openapi.json), its docs at /docs, the page for people, /metrics and HEAD on the
 * event stream (405), each
 * noting its route pattern for metrics and logs (http/Routes.ts); around them all, the edge
 * (http/Edge.ts: request ids, origins, problems).
 */
const RoutesLive = Layer.mergeAll(
  Layer.mergeAll(
    HttpApiBuilder.layer(Api, { openapiPath: "/openapi.json" }).pipe(Layer.provide(HandlersLive)),
    DocsLive,
    WebLive,
    MetricsRouteLive,
    EventStreamHeadLive
  ).pipe(Layer.provide(ObserveRoutesLive)),
  EdgeLive
)

/**
 * The routes served by the current `HttpServer` (http/FrontDoor.ts, which opens the port only once this
 * handler is installed). The edge writes the request log and metrics, so the router's own logger and
 * "listening" line are off.
 */
export const HttpLive = HttpRouter.serve(RoutesLive, { disableLogger: true, disableListenLog: true })
