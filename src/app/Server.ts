import { Layer } from "effect"
import type { NetAddress } from "effect/net"
import { ApiKeys } from "../access/ApiKeys.js"
import { ClientAddresses } from "../access/ClientAddress.js"
import { OperatorCredential } from "../access/Operator.js"
import { RateLimits } from "../access/RateLimits.js"
import { ChangeFeed } from "../events/ChangeFeed.js"
import { EventLog } from "../events/EventLog.js"
import { Subscriptions } from "../webhooks/Subscriptions.js"
import { FrontDoorLive } from "../http/FrontDoor.js"
import { HttpLive } from "./HttpLive.js"
import { StartupLive } from "./Startup.js"
import { LogFastReadsLive } from "../log/FastReads.js"
import { LogIntegrator, LogIntegratorLive } from "../log/Integrator.js"
import { LogNudge } from "../log/LogNudge.js"
import { TransparencyLog } from "../log/TransparencyLog.js"
import { LogWitnessing, LogWitnessingLive } from "../log/Witnessing.js"
import { Mcp } from "../mcp/Mcp.js"
import { MetricsState } from "../observability/Metrics.js"
import { TracingLive } from "../observability/Tracing.js"
import { DatabaseLive } from "../platform/Database.js"
import { AttemptsPrunerLive } from "../webhooks/AttemptsPruner.js"
import { DeliveriesLive } from "../webhooks/Deliveries.js"
import { WebhookKey } from "../webhooks/WebhookKey.js"
import { Receipts } from "../receipts/Receipts.js"
import { Determinations, EventSweeperLive } from "../trust/Determinations.js"
import { TrustResolver } from "../trust/TrustResolver.js"

/**
 * The composition root: the one place that knows every capability and wires them together, for the
 * server (below, src/app/Launch.ts) and the CLI (src/cli/main.ts).
 */

/**
 * Every domain service over the database. Tests build the same graph with other config and clock.
 * `MetricsState` (observability/Metrics.ts) is made once per build of this graph and shared by every
 * layer given it (Telemetry, the database, the log's nudge and integrator): each server has its own.
 */
export const ServicesLive = Layer.mergeAll(
  TrustResolver.layer,
  Determinations.layer,
  ApiKeys.layer,
  OperatorCredential.layer,
  RateLimits.layer,
  ClientAddresses.layer,
  ChangeFeed.layer,
  EventLog.layer,
  Subscriptions.layer,
  WebhookKey.layer,
  Receipts.layer,
  Mcp.layer,
  LogNudge.layer,
  TransparencyLog.layer,
  LogIntegrator.layer,
  LogWitnessing.layer
).pipe(Layer.provideMerge(DatabaseLive), Layer.provideMerge(MetricsState.layer))

/**
 * The HTTP server (http/FrontDoor.ts: opens the port once the handler is installed, drains on stop) with
 * its API, docs and problem mapping (app/HttpLive.ts), on top of the services; before the port opens, the
 * demo data (app/Startup.ts); beside it, the freshness sweeper, the log integrator, the witnessing loops
 * (log/Witnessing.ts), the webhook deliveries (webhooks/Deliveries.ts) and the prune of their attempts. Effect's tracing
 * spans (one per request and per SQL statement) are exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT
 * is set, and off otherwise: they cost measurable time per request (docs/PERFORMANCE.md).
 */
export const ServerLive = HttpLive.pipe(
  Layer.provideMerge(StartupLive),
  Layer.provide(EventSweeperLive),
  Layer.provide(LogIntegratorLive),
  Layer.provide(LogWitnessingLive),
  Layer.provide(DeliveriesLive),
  Layer.provide(AttemptsPrunerLive),
  Layer.provide(LogFastReadsLive),
  Layer.provideMerge(FrontDoorLive),
  Layer.provideMerge(ServicesLive),
  Layer.provide(TracingLive)
)

/** Where the server listens (`HttpServer.formatAddress` prints it). */
export type ServerAddress = NetAddress.SocketAddress
