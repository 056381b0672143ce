import { Context, Effect, Layer, Metric } from "effect"
import { DatabasePools, type DatabasePoolsShape, makeDatabasePools, type PoolSource } from "../platform/Pools.js"

/**
 * The service's own metrics, recorded with Effect's `Metric` API and exported by `Telemetry.ts` in the
 * Prometheus text format (effect/observability's PrometheusMetrics). Effect keeps one registry per
 * process, so every server in a process (tests start several) adds to the same counters; each sets the
 * gauges from its own sources right before it formats a scrape. Counters carry
 * their Prometheus name (`…_total`) as their id.
 *
 * Hot paths update through labelled metrics made once: an update is a registry lookup and an addition.
 *
 * What a server keeps to record and observe (its request series, its transparency-log progress, its
 * database pools) is the scoped `MetricsState` service at the end of this file: each server's layers
 * build their own, so two servers in one process never share it.
 */

/** Effect's default registry (and no contextual attributes): the one `Telemetry.ts` exports. */
const registry = Context.empty()

type Labels = Readonly<Record<string, string>>

/** `metric` with `labels`, made once per label set. */
const labelled = <M extends Metric.Metric<any, any>>(metric: M) => {
  const made = new Map<string, M>()
  return (labels: Labels): M => {
    const key = JSON.stringify(labels)
    let found = made.get(key)
    if (found === undefined) made.set(key, found = Metric.withAttributes(metric, labels) as M)
    return found
  }
}

// ---- HTTP requests ---------------------------------------------------------------------------------

const httpRequests = Metric.counter("pv_http_requests_total", {
  description: "HTTP requests answered, by route pattern, method and status (route \"unmatched\": no route, or refused before routing).",
  incremental: true
})

const httpDuration = Metric.histogram("pv_http_request_duration_seconds", {
  description: "Time from a request's arrival to the end of its response, in seconds, by route pattern, method and status.",
  boundaries: Metric.boundariesFromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])
})

/** The route label of a request that matched no route (404s, and refusals made before routing). */
export const UnmatchedRoute = "unmatched"

/**
 * One series of the request metrics: the context its updates run in (the registry's, with its labels as the
 * metric attributes), made once. `Metric.withAttributes` would add the labels to the context on every update
 * (a new context each time, twice a request).
 */
interface RequestSeries {
  readonly context: Context.Context<never>
}

/** The labelled request metrics, made once per route, method and status; `record` adds one answered request. */
const makeRequestSeries = () => {
  const requestSeries = new Map<string, Map<string, Map<number, RequestSeries>>>()
  const requestSeriesOf = (route: string, method: string, status: number): RequestSeries => {
    let byMethod = requestSeries.get(route)
    if (byMethod === undefined) requestSeries.set(route, byMethod = new Map())
    let byStatus = byMethod.get(method)
    if (byStatus === undefined) byMethod.set(method, byStatus = new Map())
    let found = byStatus.get(status)
    if (found === undefined) {
      const labels = { route, method, status: String(status) }
      byStatus.set(status, found = { context: Context.add(registry, Metric.CurrentMetricAttributes, labels) })
    }
    return found
  }
  return (route: string | null, method: string, status: number, seconds: number): void => {
    const series = requestSeriesOf(route ?? UnmatchedRoute, method, status)
    httpRequests.updateUnsafe(1, series.context)
    httpDuration.updateUnsafe(seconds, series.context)
  }
}

// ---- Domain counters -------------------------------------------------------------------------------

const receiptsCreated = Metric.counter("pv_receipts_created_total", { description: "Reliance receipts stored.", incremental: true })
const receiptsReplayed = Metric.counter("pv_receipts_replayed_total", {
  description: "Receipt creations answered with an existing receipt (idempotent replays).",
  incremental: true
})

/** A `create` that returned a receipt: new, or the stored one for the same idempotency key. */
export const countReceipt = (idempotent: boolean): Effect.Effect<void> =>
  Effect.sync(() => (idempotent ? receiptsReplayed : receiptsCreated).updateUnsafe(1, registry))

const eventsAppended = labelled(
  Metric.counter("pv_events_appended_total", { description: "Events appended to determination chains, by type.", incremental: true })
)

export const countEventAppended = (type: string): Effect.Effect<void> => Effect.sync(() => eventsAppended({ type }).updateUnsafe(1, registry))

const rateLimitRejections = labelled(Metric.counter("pv_rate_limit_rejections_total", {
  description: "Requests refused with 429 rate-limited, by limit: key (per-key minute), human, operator, log (per address), auth_failures.",
  incremental: true
}))
const quotaRejections = Metric.counter("pv_quota_rejections_total", {
  description: "Requests refused with 429 quota-exceeded (a key's daily quota).",
  incremental: true
})

export type RateLimitBucket = "key" | "human" | "operator" | "log" | "auth_failures"

export const countRateLimited = (bucket: RateLimitBucket): Effect.Effect<void> =>
  Effect.sync(() => rateLimitRejections({ limit: bucket }).updateUnsafe(1, registry))

export const countQuotaExceeded: Effect.Effect<void> = Effect.sync(() => quotaRejections.updateUnsafe(1, registry))

const databaseErrors = labelled(Metric.counter("pv_db_errors_total", {
  description: "Requests failed by a database error: unavailable (answered 503) or input (data the database refused, answered 422).",
  incremental: true
}))

export const countDatabaseError = (kind: "unavailable" | "input"): void => databaseErrors({ kind }).updateUnsafe(1, registry)

// ---- Transparency log ------------------------------------------------------------------------------

const logEntriesIntegrated = Metric.counter("pv_log_entries_integrated_total", {
  description: "Entries this instance integrated into the transparency log.",
  incremental: true
})

export interface LogState {
  /** Size of the latest checkpoint this instance committed or saw; -1 before the first round. */
  readonly size: number
  /** performance.now() of the oldest entry written here that no completed round has covered yet. */
  readonly oldestWaiting: number | undefined
}

/** What an integration round reports to `LogProgress.roundEnded` (undefined: the round failed). */
export type RoundOutcome = { readonly locked: boolean; readonly size: number; readonly appended: number; readonly full: boolean } | undefined

/** The transparency log's progress as this instance sees it: the log-size and integration-lag gauges. */
export interface LogProgress {
  /** What the gauges read now. */
  readonly state: () => LogState
  /** A local write queued a log entry (the integrator's nudge). */
  readonly entryQueued: () => void
  /**
   * The integrator's hook. `roundStarted` is called as a round starts and returns what `roundEnded` needs: a
   * round that held the lock covered every entry written before it began (it moves pending entries up to
   * its limit; a full round is followed at once by another), so the waiting mark is cleared unless a
   * write came in during the round.
   */
  readonly roundStarted: () => number | undefined
  readonly roundEnded: (waitingBefore: number | undefined, result: RoundOutcome) => void
  /** Seconds the oldest entry written here has waited for integration (0: none waiting). */
  readonly lagSeconds: () => number
}

const makeLogProgress = (): LogProgress => {
  let size = -1
  let oldestWaiting: number | undefined = undefined
  return {
    state: () => ({ size, oldestWaiting }),
    entryQueued: () => {
      if (oldestWaiting === undefined) oldestWaiting = performance.now()
    },
    roundStarted: () => {
      const waiting = oldestWaiting
      oldestWaiting = undefined
      return waiting
    },
    roundEnded: (waitingBefore, result) => {
      const covered = result !== undefined && result.locked && !result.full
      if (!covered && waitingBefore !== undefined) {
        oldestWaiting = oldestWaiting === undefined ? waitingBefore : Math.min(waitingBefore, oldestWaiting)
      }
      if (result !== undefined && result.locked) {
        size = result.size
        if (result.appended > 0) logEntriesIntegrated.updateUnsafe(result.appended, registry)
      }
    },
    lagSeconds: () => (oldestWaiting === undefined ? 0 : (performance.now() - oldestWaiting) / 1000)
  }
}

// ---- Witnesses -------------------------------------------------------------------------------------

const witnessAnswers = labelled(Metric.counter("pv_witness_add_checkpoint_total", {
  description: "add-checkpoint answers of `pv witness serve`, by status (200 cosigned; 400, 403, 404, 409, 422 refused).",
  incremental: true
}))

export const countWitnessAnswer = (status: number): void => witnessAnswers({ status: String(status) }).updateUnsafe(1, registry)

const witnessSubmissions = labelled(Metric.counter("pv_log_witness_submissions_total", {
  description: "Checkpoints the log submitted to each witness, by witness name and answer (HTTP status, or \"error\" when none came).",
  incremental: true
}))

const witnessRefusals = labelled(Metric.counter("pv_log_witness_refusals_total", {
  description: "Checkpoints a witness refused to cosign (403, 404, 422, a 409 for the same size, or an answer that does not verify), by witness and answer.",
  incremental: true
}))

export const countWitnessSubmission = (witness: string, answer: string): void =>
  witnessSubmissions({ witness, answer }).updateUnsafe(1, registry)

export const countWitnessRefusal = (witness: string, answer: string): void => witnessRefusals({ witness, answer }).updateUnsafe(1, registry)

/** What the witness gauges read (`MetricsState.witness`); -1: none yet, or no witnesses. */
export interface WitnessState {
  /** Size of the newest checkpoint this instance found with a quorum of cosignatures. */
  witnessedSize: number
  /** Size of the latest checkpoint this instance serves. */
  latestSize: number
}

// ---- Webhook deliveries and event streams ----------------------------------------------------------

const webhookDeliveries = labelled(Metric.counter("pv_webhook_deliveries_total", {
  description: "Webhook attempts, by outcome: delivered (2xx), failed (retried later), disabled (the failure that disabled the subscription).",
  incremental: true
}))
const webhookLag = Metric.histogram("pv_webhook_delivery_lag_seconds", {
  description: "Time from an event's append to the receiver's 2xx, in seconds.",
  boundaries: Metric.boundariesFromIterable([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600])
})

export const countWebhookAttempt = (outcome: "delivered" | "failed" | "disabled", lagSeconds?: number): void => {
  webhookDeliveries({ outcome }).updateUnsafe(1, registry)
  if (lagSeconds !== undefined) webhookLag.updateUnsafe(Math.max(0, lagSeconds), registry)
}

/** What the delivery worker last read of the outbox (every instance reads the same, shared table); -1 before its first read. */
export interface DeliveryState {
  pending: number
  disabled: number
}

/** The front door's admission limit now (fixed, or the adaptive limit's current value); -1 before a front door sets it. */
export interface AdmissionState {
  limit: () => number
}

// ---- Gauges, read at scrape time -------------------------------------------------------------------

const poolConnections = labelled(Metric.gauge("pv_db_pool_connections", {
  description: "Database pool connections: total open, and idle among them (summed over this process's pools)."
}))
// No series for statements waiting for a connection: @effect/sql-pg's pool does not expose them, and a
// gauge stuck at 0 would tell a dashboard "none waiting" during exactly the exhaustion it should show.
const circuitOpen = Metric.gauge("pv_db_circuit_open", {
  description: "1 while the database outage circuit breaker is open (statements fail at once with 503), else 0."
})
const logSize = Metric.gauge("pv_log_size", { description: "Entries in the transparency log as of the latest checkpoint this instance integrated." })
const logLag = Metric.gauge("pv_log_integration_lag_seconds", {
  description: "How long the oldest log entry written by this instance has waited for a checkpoint (0: none waiting)."
})
const witnessedSize = Metric.gauge("pv_log_witnessed_size", {
  description: "Entries covered by the checkpoint /log/checkpoint serves: the newest with a quorum of witness cosignatures."
})
const witnessLag = Metric.gauge("pv_log_witness_lag_entries", {
  description: "Entries in the latest checkpoint that no witnessed checkpoint covers yet (0 when witnessing keeps up)."
})
const webhookPending = Metric.gauge("pv_webhook_pending_deliveries", {
  description: "Events owed to active webhook subscriptions and not yet acknowledged (all instances; as of this instance's last look)."
})
const webhookDisabled = Metric.gauge("pv_webhook_disabled_subscriptions", {
  description: "Webhook subscriptions disabled after failing for PV_WEBHOOK_MAX_FAILURE_SECONDS (all instances)."
})
const admissionLimit = Metric.gauge("pv_http_concurrency_limit", {
  description: "Requests this process admits at once now: PV_MAX_IN_FLIGHT when pinned, else the adaptive limit's current value."
})
const streamsOpen = Metric.gauge("pv_event_streams_open", { description: "Event streams (GET /api/v1/events/stream) open on this process." })
const memory = labelled(Metric.gauge("pv_process_memory_bytes", { description: "Process memory (process.memoryUsage()), by type." }))

/** Sets every gauge from its source (pools, circuit breaker, transparency log, process memory): called before each scrape. */
const observeGauges = (
  observedPools: ReadonlySet<PoolSource>,
  log: LogProgress,
  witnessState: WitnessState,
  deliveryState: DeliveryState,
  streamState: { readonly open: number },
  admissionState: AdmissionState
): void => {
  let total = 0
  let idle = 0
  let open = 0
  for (const source of observedPools) {
    total += source.pool.totalCount
    idle += source.pool.idleCount
    if (!source.answering()) open = 1
  }
  poolConnections({ state: "total" }).updateUnsafe(total, registry)
  poolConnections({ state: "idle" }).updateUnsafe(idle, registry)
  circuitOpen.updateUnsafe(open, registry)
  // Only an instance that integrates knows both (PV_LOG_INTEGRATION_INTERVAL_MS=0 leaves it to another).
  const logState = log.state()
  if (logState.size >= 0) {
    logSize.updateUnsafe(logState.size, registry)
    logLag.updateUnsafe(log.lagSeconds(), registry)
  }
  if (witnessState.witnessedSize >= 0 || witnessState.latestSize >= 0) {
    witnessedSize.updateUnsafe(Math.max(0, witnessState.witnessedSize), registry)
    witnessLag.updateUnsafe(Math.max(0, witnessState.latestSize - Math.max(0, witnessState.witnessedSize)), registry)
  }
  if (deliveryState.pending >= 0) {
    webhookPending.updateUnsafe(deliveryState.pending, registry)
    webhookDisabled.updateUnsafe(deliveryState.disabled, registry)
  }
  streamsOpen.updateUnsafe(streamState.open, registry)
  const limit = admissionState.limit()
  if (limit >= 0) admissionLimit.updateUnsafe(limit, registry)
  const usage = process.memoryUsage()
  memory({ type: "rss" }).updateUnsafe(usage.rss, registry)
  memory({ type: "heap_total" }).updateUnsafe(usage.heapTotal, registry)
  memory({ type: "heap_used" }).updateUnsafe(usage.heapUsed, registry)
  memory({ type: "external" }).updateUnsafe(usage.external, registry)
  memory({ type: "array_buffers" }).updateUnsafe(usage.arrayBuffers, registry)
}

// ---- The server's own state ------------------------------------------------------------------------

export interface MetricsStateShape {
  /** One answered request (called through Telemetry when a response ends). */
  readonly recordRequest: (route: string | null, method: string, status: number, seconds: number) => void
  readonly log: LogProgress
  /** The witness gauges' sources, set by TransparencyLog. */
  readonly witness: WitnessState
  /** The webhook gauges' sources, set by the delivery worker. */
  readonly delivery: DeliveryState
  /** Event streams this server has open (LiveStream). */
  readonly streams: { open: number }
  /** The admission-limit gauge's source, set by the front door. */
  readonly admission: AdmissionState
  /** Registers a pool for the gauges until the returned function is called. */
  readonly observePool: (source: PoolSource) => () => void
  /** Sets every gauge from this server's sources; the scrape formats the registry right after. */
  readonly observeGauges: () => void
}

export const makeMetricsState = (pools: DatabasePoolsShape = makeDatabasePools()): MetricsStateShape => {
  const observedPools = pools.sources
  const log = makeLogProgress()
  const witness: WitnessState = { witnessedSize: -1, latestSize: -1 }
  const delivery: DeliveryState = { pending: -1, disabled: -1 }
  const streams = { open: 0 }
  const admission: AdmissionState = { limit: () => -1 }
  return {
    recordRequest: makeRequestSeries(),
    log,
    witness,
    delivery,
    streams,
    admission,
    observePool: pools.observe,
    observeGauges: () => observeGauges(observedPools, log, witness, delivery, streams, admission)
  }
}

/**
 * What one server records and observes: its request series, its transparency-log progress, witness
 * and delivery figures, open event streams and database pools. Every layer that needs it (Telemetry, the database, the log's nudge and integrator)
 * is given `MetricsState.layer`; one build of a server's layers makes one (layers are shared within a
 * build), and another server, in this process or not, makes its own.
 */
export class MetricsState extends Context.Service<MetricsState, MetricsStateShape>()("pv/MetricsState") {
  static readonly layer: Layer.Layer<MetricsState> = Layer.effect(this, Effect.map(DatabasePools, (pools) => makeMetricsState(pools))).pipe(
    Layer.provide(DatabasePools.layer)
  )
}
