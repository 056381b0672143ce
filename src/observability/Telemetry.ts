import { createHash, timingSafeEqual } from "node:crypto"
import type * as Http from "node:http"
import * as OtelMetrics from "@effect/opentelemetry/Metrics"
import * as OtelResource from "@effect/opentelemetry/Resource"
import { PrometheusExporter } from "@opentelemetry/exporter-prometheus"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { MeterProvider } from "@opentelemetry/sdk-metrics"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "../platform/Config.js"
import { logIntegrationLagSeconds, logState, observedPools, recordRequest } from "./Metrics.js"
import type { RequestRecord } from "./RequestRecord.js"

/**
 * What the front door (http/FrontDoor.ts) needs from observability: the `/metrics` endpoint and the
 * end-of-request hook that records request metrics and, with PV_LOG_FORMAT=json, writes the request's
 * log line.
 */
export interface TelemetryShape {
  /** True when `/metrics` may be served to this request (no PV_METRICS_TOKEN, or the right bearer token). */
  readonly metricsAuthorized: (req: Http.IncomingMessage) => boolean
  /** Writes the Prometheus text exposition (the exporter's own request handler). */
  readonly serveMetrics: (req: Http.IncomingMessage, res: Http.ServerResponse) => void
  /** Once per request, when its response has ended or its connection closed. */
  readonly requestEnded: (req: Http.IncomingMessage, res: Http.ServerResponse, record: RequestRecord) => void
  /** A request the HTTP parser refused (answered on the raw socket with a generated request id). */
  readonly parserRefusal: (requestId: string, status: number) => void
}

export class Telemetry extends Context.Tag("pv/Telemetry")<Telemetry, TelemetryShape>() {}

/** The path the metrics are served at, on the service's own port. */
export const MetricsPath = "/metrics"

const digest = (value: string) => createHash("sha256").update(value).digest()

/** `Authorization: Bearer <token>` compared in constant time (over SHA-256 digests, so lengths do not leak). */
const bearerMatches = (header: string | undefined, expected: Buffer): boolean => {
  if (header === undefined || header.length < 7 || header.slice(0, 7).toLowerCase() !== "bearer ") return false
  return timingSafeEqual(digest(header.slice(7).trim()), expected)
}

const pathOf = (url: string | undefined) => {
  const raw = url ?? "/"
  const q = raw.indexOf("?")
  return q === -1 ? raw : raw.slice(0, q)
}

/**
 * Status as recorded: the one sent, or 499 (nginx's "client closed request") when the connection
 * closed before any response began.
 */
const statusOf = (res: Http.ServerResponse) => (res.headersSent ? res.statusCode : 499)

/** One JSON line: ids only (the key id, never the key), and the route pattern rather than the path where one matched. */
const logLine = (req: Http.IncomingMessage | undefined, status: number, record: RequestRecord, durationMs: number) =>
  JSON.stringify({
    time: new Date(performance.timeOrigin + record.startedAt).toISOString(),
    request_id: record.id,
    method: req?.method ?? null,
    route: record.route,
    // Where no route matched (404s, refusals before routing), the path says what was asked for.
    path: req === undefined ? null : record.route === null ? pathOf(req.url) : undefined,
    status,
    duration_ms: Math.round(durationMs * 1000) / 1000,
    key_id: record.keyId,
    tenant_id: record.tenantId
  }) + "\n"

/**
 * The metrics pipeline: Effect's metrics (src/observability/Metrics.ts) through @effect/opentelemetry's
 * producer, and observable gauges (database pools, circuit breaker, transparency log, process memory) on
 * an OpenTelemetry MeterProvider, both read by one Prometheus exporter that never opens a port of its own.
 */
const makeExporter = (serviceName: string) =>
  Effect.gen(function*() {
    const resource = resourceFromAttributes({ "service.name": serviceName })
    const effectMetrics = yield* OtelMetrics.makeProducer.pipe(Effect.provideService(OtelResource.Resource, resource))
    const exporter = new PrometheusExporter({ preventServerStart: true, metricProducers: [effectMetrics] })
    const provider = yield* Effect.acquireRelease(
      Effect.sync(() => new MeterProvider({ resource, readers: [exporter] })),
      (provider) => Effect.promise(() => provider.shutdown()).pipe(Effect.ignore, Effect.timeoutOption("1 second"))
    )
    const meter = provider.getMeter("pv-trust-service")

    const poolConnections = meter.createObservableGauge("pv_db_pool_connections", {
      description: "Database pool connections: total open, and idle among them (summed over this process's pools)."
    })
    const poolWaiting = meter.createObservableGauge("pv_db_pool_waiting_clients", {
      description: "Statements waiting for a free database pool connection."
    })
    const circuitOpen = meter.createObservableGauge("pv_db_circuit_open", {
      description: "1 while the database outage circuit breaker is open (statements fail at once with 503), else 0."
    })
    const logSize = meter.createObservableGauge("pv_log_size", {
      description: "Entries in the transparency log as of the latest checkpoint this instance integrated."
    })
    const logLag = meter.createObservableGauge("pv_log_integration_lag_seconds", {
      description: "How long the oldest log entry written by this instance has waited for a checkpoint (0: none waiting)."
    })
    const memory = meter.createObservableGauge("pv_process_memory_bytes", {
      description: "Process memory (process.memoryUsage()), by type.",
      unit: "By"
    })
    meter.addBatchObservableCallback((observer) => {
      let total = 0
      let idle = 0
      let waiting = 0
      let open = 0
      for (const source of observedPools) {
        total += source.pool.totalCount
        idle += source.pool.idleCount
        waiting += source.pool.waitingCount
        if (!source.answering()) open = 1
      }
      observer.observe(poolConnections, total, { state: "total" })
      observer.observe(poolConnections, idle, { state: "idle" })
      observer.observe(poolWaiting, waiting)
      observer.observe(circuitOpen, open)
      // Only an instance that integrates knows both (PV_LOG_INTEGRATION_INTERVAL_MS=0 leaves it to another).
      if (logState.size >= 0) {
        observer.observe(logSize, logState.size)
        observer.observe(logLag, logIntegrationLagSeconds())
      }
      const usage = process.memoryUsage()
      observer.observe(memory, usage.rss, { type: "rss" })
      observer.observe(memory, usage.heapTotal, { type: "heap_total" })
      observer.observe(memory, usage.heapUsed, { type: "heap_used" })
      observer.observe(memory, usage.external, { type: "external" })
      observer.observe(memory, usage.arrayBuffers, { type: "array_buffers" })
    }, [poolConnections, poolWaiting, circuitOpen, logSize, logLag, memory])
    return exporter
  })

export const TelemetryLive: Layer.Layer<Telemetry, never, AppConfig> = Layer.scoped(
  Telemetry,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const exporter = yield* makeExporter(config.otelServiceName)
    const token = Option.map(config.metricsToken, (t) => digest(Redacted.value(t)))
    const json = config.logFormat === "json"
    return {
      metricsAuthorized: (req) => Option.isNone(token) || bearerMatches(req.headers.authorization, token.value),
      serveMetrics: (req, res) => exporter.getMetricsRequestHandler(req, res),
      requestEnded: (req, res, record) => {
        const durationMs = performance.now() - record.startedAt
        const status = statusOf(res)
        recordRequest(record.route, req.method ?? "", status, durationMs / 1000)
        if (json) process.stdout.write(logLine(req, status, record, durationMs))
      },
      parserRefusal: (requestId, status) => {
        recordRequest(null, "unknown", status, 0)
        if (json) {
          const record: RequestRecord = { id: requestId, startedAt: performance.now(), route: null, keyId: null, tenantId: null }
          process.stdout.write(logLine(undefined, status, record, 0))
        }
      }
    }
  })
)
