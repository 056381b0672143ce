import { createHash, timingSafeEqual } from "node:crypto"
import type * as Http from "node:http"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { AppConfig } from "../platform/Config.js"
import {
  isClusterMessage,
  isClusterWorker,
  type MetricsGather,
  type MetricsGathered,
  MetricsGatherMs,
  type MetricsText,
  sendToPrimary
} from "../platform/Cluster.js"
import { formatExposition, mergeWorkers } from "./Exposition.js"
import { type AdmissionState, MetricsState } from "./Metrics.js"
import { makeRequestRecord, type RequestRecord } from "./RequestRecord.js"
import { Internal } from "../domain/Problem.js"

/**
 * What the HTTP edge needs from observability: the `/metrics` route's exposition (http/Routes.ts)
 * and the end-of-request hook that records request metrics and, with PV_LOG_FORMAT=json, writes the
 * request's log line (called by the edge middleware, http/Edge.ts, and for the answers the front door
 * gives itself, http/FrontDoor.ts).
 */
export interface TelemetryShape {
  /** True when `/metrics` may be served to this `Authorization` header (no PV_METRICS_TOKEN, or the right bearer token). */
  readonly metricsAuthorized: (authorization: string | undefined) => boolean
  /** The Prometheus text exposition of every metric of this process (of every worker in a cluster). */
  readonly exposition: Effect.Effect<string, Internal>
  /** Once per request, when its response has ended or its connection closed. */
  readonly requestEnded: (req: Http.IncomingMessage, res: Http.ServerResponse, record: RequestRecord) => void
  /** A request the HTTP parser refused (answered on the raw socket with a generated request id). */
  readonly parserRefusal: (requestId: string, status: number) => void
  /** The admission-limit gauge's source (this server's MetricsState), set by the front door. */
  readonly admission: AdmissionState
}

/** The path the metrics are served at, on the service's own port. */
export const MetricsPath = "/metrics"

const collectionFailed = () => new Internal({ detail: "The metrics could not be collected." })

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

/** Effect's default metric registry, where every metric of src/observability/Metrics.ts is recorded. */
const registry = Context.empty()

/**
 * The text exposition format, version 0.0.4 (what Prometheus scrapes), with the gauges set from this
 * server's sources just before. A collection that throws (`process.memoryUsage()` fails with EMFILE when
 * file descriptors run out, exactly when a scrape matters) answers 500 instead of crashing the process.
 */
const expositionOf = (observeGauges: () => void) => (): string => {
  observeGauges()
  return PrometheusMetrics.formatUnsafe(registry)
}

const collect = (body: () => string): Effect.Effect<string, Internal> => Effect.try({ try: body, catch: collectionFailed })

/** The gauges that say how complete a cluster's scrape is. */
const clusterGauges = (expected: number, reporting: number) =>
  "# HELP pv_cluster_workers Worker processes the cluster runs (PV_WORKERS).\n" +
  "# TYPE pv_cluster_workers gauge\n" +
  `pv_cluster_workers ${expected}\n` +
  `# HELP pv_cluster_workers_reporting Workers whose metrics this scrape includes (below pv_cluster_workers: some did not answer within ${MetricsGatherMs} ms).\n` +
  "# TYPE pv_cluster_workers_reporting gauge\n" +
  `pv_cluster_workers_reporting ${reporting}\n`

/**
 * In a cluster worker (PV_WORKERS > 1), a scrape reports every worker: the primary asks each for its
 * exposition (bounded by MetricsGatherMs) and this worker merges them (Exposition.ts): counters and
 * histograms summed, gauges per worker (label `worker`). Every worker answers the primary's requests.
 * Returns the scrape and the listener's removal.
 */
const joinClusterMetrics = (ownExposition: () => string, cluster: { readonly workerIndex: number; readonly workers: number }) => {
  const me = String(cluster.workerIndex)
  let gathers = 0
  const waiting = new Map<number, (gathered: MetricsGathered | undefined) => void>()
  const onMessage = (message: unknown) => {
    if (!isClusterMessage(message)) return
    if (message.pv === "metrics:collect") {
      let text: string
      try {
        text = ownExposition()
      } catch {
        return // counted as missing by pv_cluster_workers_reporting
      }
      sendToPrimary({ pv: "metrics:text", id: message.id, worker: me, text } satisfies MetricsText)
    } else if (message.pv === "metrics:gathered") waiting.get(message.id)?.(message)
  }
  process.on("message", onMessage)
  const scrape = Effect.callback<string, Internal>((resume) => {
    const id = ++gathers
    const complete = (gathered: MetricsGathered | undefined) => {
      if (!waiting.delete(id)) return
      clearTimeout(timer)
      resume(collect(() => {
        const texts = [...(gathered?.texts ?? [])]
        // Its own text even when the primary's answer lacks it (a drain has begun, or the primary is gone).
        if (!texts.some((part) => part.worker === me)) texts.push({ worker: me, text: ownExposition() })
        const expected = gathered?.expected ?? Math.max(texts.length, cluster.workers)
        return formatExposition(mergeWorkers(texts)) + clusterGauges(expected, texts.length)
      }))
    }
    // The primary answers within MetricsGatherMs; this bound holds if it cannot.
    const timer = setTimeout(() => complete(undefined), MetricsGatherMs + 500)
    waiting.set(id, complete)
    if (!sendToPrimary({ pv: "metrics:gather", id } satisfies MetricsGather)) complete(undefined)
    return Effect.sync(() => {
      waiting.delete(id)
      clearTimeout(timer)
    })
  })
  return { scrape, leave: () => process.off("message", onMessage) }
}

const makeTelemetry = Effect.gen(function*() {
  const config = yield* AppConfig
  const token = Option.map(config.metricsToken, (t) => digest(Redacted.value(t)))
  const json = config.logFormat === "json"
  const { recordRequest, observeGauges, admission } = yield* MetricsState
  const ownExposition = expositionOf(observeGauges)
  const clustered = isClusterWorker() ? joinClusterMetrics(ownExposition, config) : undefined
  if (clustered !== undefined) yield* Effect.addFinalizer(() => Effect.sync(clustered.leave))
  const telemetry: TelemetryShape = {
    metricsAuthorized: (authorization) => Option.isNone(token) || bearerMatches(authorization, token.value),
    exposition: Effect.withSpan(clustered === undefined ? collect(ownExposition) : clustered.scrape, "Telemetry.exposition"),
    requestEnded: (req, res, record) => {
      const durationMs = performance.now() - record.startedAt
      const status = statusOf(res)
      recordRequest(record.route, req.method ?? "", status, durationMs / 1000)
      if (json) process.stdout.write(logLine(req, status, record, durationMs))
    },
    parserRefusal: (requestId, status) => {
      recordRequest(null, "unknown", status, 0)
      if (json) {
        const record: RequestRecord = makeRequestRecord(requestId, performance.now())
        process.stdout.write(logLine(undefined, status, record, 0))
      }
    },
    admission
  }
  return telemetry
})

/**
 * The metrics endpoint and the end-of-request hook. Metrics are Effect's own (src/observability/Metrics.ts),
 * printed by effect/observability's PrometheusMetrics; the gauges (database pools, circuit breaker,
 * transparency log, process memory) are read from their sources at each scrape.
 */
export class Telemetry extends Context.Service<Telemetry, TelemetryShape>()("pv/Telemetry", { make: makeTelemetry }) {
  static readonly layerNoDeps: Layer.Layer<Telemetry, never, AppConfig | MetricsState> = Layer.effect(this, this.make)
  /** With the server's MetricsState (the one instance of its build: see observability/Metrics.ts). */
  static readonly layer: Layer.Layer<Telemetry, never, AppConfig> = this.layerNoDeps.pipe(Layer.provide(MetricsState.layer))
}

