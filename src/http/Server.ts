import { HttpApiBuilder, HttpApiScalar, HttpServer } from "@effect/platform"
import { Layer } from "effect"
import { ApiKeysHttpLive } from "../access/Http.js"
import { ApiKeyAuthLive, OperatorAuthLive } from "../access/Auth.js"
import { ApiKeys } from "../access/ApiKeys.js"
import { ClientAddressesLive } from "../access/ClientAddress.js"
import { OperatorCredential } from "../access/Operator.js"
import { RateLimitsLive } from "../access/RateLimits.js"
import { DatabaseLive } from "../platform/Database.js"
import { Determinations } from "../trust/Determinations.js"
import { DeterminationsHttpLive } from "../trust/DeterminationsHttp.js"
import { TrustHttpLive } from "../trust/Http.js"
import { Receipts } from "../receipts/Receipts.js"
import { ReceiptsHttpLive } from "../receipts/Http.js"
import { EventLog, EventSweeperLive } from "../events/EventLog.js"
import { EventsHttpLive } from "../events/Http.js"
import { Subscriptions } from "../events/Subscriptions.js"
import { TrustResolver } from "../trust/TrustResolver.js"
import { Mcp } from "../mcp/Mcp.js"
import { McpHttpLive } from "../mcp/Http.js"
import { LogHttpLive } from "../log/Http.js"
import { LogIntegrator, LogIntegratorLive } from "../log/Integrator.js"
import { LogNudge } from "../log/LogNudge.js"
import { TransparencyLog } from "../log/TransparencyLog.js"
import { Api } from "./Api.js"
import { FrontDoorLive } from "./FrontDoor.js"
import { ProblemsLive } from "./Problems.js"
import { SystemHttpLive } from "./SystemHttp.js"
import { StartupLive } from "./Startup.js"
import { WebLive } from "../web/Web.js"
import { ServeObservedLive } from "../observability/Routes.js"
import { TracingLive } from "../observability/Tracing.js"

/** Every domain service over the database. Tests build the same graph with other config and clock. */
export const ServicesLive = Layer.mergeAll(
  TrustResolver.Default,
  Determinations.Default,
  ApiKeys.Default,
  OperatorCredential.Default,
  RateLimitsLive,
  ClientAddressesLive,
  EventLog.Default,
  Subscriptions.Default,
  Receipts.Default,
  Mcp.Default,
  LogNudge.Default,
  TransparencyLog.Default,
  LogIntegrator.Default
).pipe(Layer.provideMerge(DatabaseLive))

const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([TrustHttpLive, DeterminationsHttpLive, ApiKeysHttpLive, SystemHttpLive, ReceiptsHttpLive]),
  Layer.provide(EventsHttpLive),
  Layer.provide(McpHttpLive),
  Layer.provide(LogHttpLive),
  Layer.provide([ApiKeyAuthLive, OperatorAuthLive])
)

/**
 * The HTTP server (http/FrontDoor.ts: opens the port once the handler is installed, drains on stop) with
 * its API, docs and problem mapping, on top of the services. `ServeObservedLive` is HttpApiBuilder.serve()
 * with each route noting its pattern for metrics and logs (observability/Routes.ts). Effect's tracing
 * spans (one per request and per SQL statement) are exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT
 * is set, and off otherwise: they cost measurable time per request (docs/PERFORMANCE.md).
 */
export const ServerLive = ServeObservedLive.pipe(
  Layer.provide(HttpApiScalar.layer({ path: "/docs" })),
  Layer.provide(WebLive),
  Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
  Layer.provide(ProblemsLive),
  Layer.provide(ApiLive),
  Layer.provideMerge(StartupLive),
  Layer.provide(EventSweeperLive),
  Layer.provide(LogIntegratorLive),
  Layer.provideMerge(FrontDoorLive),
  Layer.provideMerge(ServicesLive),
  Layer.provide(TracingLive)
)

export type ServerAddress = HttpServer.Address
