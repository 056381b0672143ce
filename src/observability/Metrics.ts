import { Effect, Metric, MetricBoundaries, MetricLabel } from "effect"

/**
 * The service's own metrics, recorded with Effect's `Metric` API and exported by `Telemetry.ts` (through
 * @effect/opentelemetry's metric producer and the OpenTelemetry Prometheus exporter). Effect keeps one
 * registry per process, so every server in a process (tests start several) adds to the same series.
 *
 * Hot paths update through label arrays made once: Effect caches a tagged metric's hook per label
 * array, so an update is a lookup and an addition, with no allocation.
 */

const labels = (entries: Record<string, string>): ReadonlyArray<MetricLabel.MetricLabel> =>
  Object.entries(entries).map(([key, value]) => MetricLabel.make(key, value))

// ---- HTTP requests ---------------------------------------------------------------------------------

const httpRequests = Metric.counter("pv_http_requests", {
  description: "HTTP requests answered, by route pattern, method and status (route \"unmatched\": no route, or refused before routing).",
  incremental: true
})

const httpDuration = Metric.histogram(
  "pv_http_request_duration_seconds",
  MetricBoundaries.fromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
  "Time from a request's arrival to the end of its response, in seconds, by route pattern, method and status."
)

/** The route label of a request that matched no route (404s, and refusals made before routing). */
export const UnmatchedRoute = "unmatched"

const requestLabels = new Map<string, Map<string, Map<number, ReadonlyArray<MetricLabel.MetricLabel>>>>()

const requestLabelsOf = (route: string, method: string, status: number) => {
  let byMethod = requestLabels.get(route)
  if (byMethod === undefined) requestLabels.set(route, byMethod = new Map())
  let byStatus = byMethod.get(method)
  if (byStatus === undefined) byMethod.set(method, byStatus = new Map())
  let found = byStatus.get(status)
  if (found === undefined) byStatus.set(status, found = labels({ route, method, status: String(status) }))
  return found
}

/** One answered request (called by the front door when its response ends). */
export const recordRequest = (route: string | null, method: string, status: number, seconds: number): void => {
  const tags = requestLabelsOf(route ?? UnmatchedRoute, method, status)
  httpRequests.unsafeUpdate(1, tags)
  httpDuration.unsafeUpdate(seconds, tags)
}

// ---- Domain counters -------------------------------------------------------------------------------

const receiptsCreated = Metric.counter("pv_receipts_created", { description: "Reliance receipts stored.", incremental: true })
const receiptsReplayed = Metric.counter("pv_receipts_replayed", {
  description: "Receipt creations answered with an existing receipt (idempotent replays).",
  incremental: true
})
const noLabels: ReadonlyArray<MetricLabel.MetricLabel> = []

/** A `create` that returned a receipt: new, or the stored one for the same idempotency key. */
export const countReceipt = (idempotent: boolean): Effect.Effect<void> =>
  Effect.sync(() => (idempotent ? receiptsReplayed : receiptsCreated).unsafeUpdate(1, noLabels))

const eventsAppended = Metric.counter("pv_events_appended", { description: "Events appended to determination chains, by type.", incremental: true })
const eventLabels = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()

export const countEventAppended = (type: string): Effect.Effect<void> =>
  Effect.sync(() => {
    let tags = eventLabels.get(type)
    if (tags === undefined) eventLabels.set(type, tags = labels({ type }))
    eventsAppended.unsafeUpdate(1, tags)
  })

const rateLimitRejections = Metric.counter("pv_rate_limit_rejections", {
  description: "Requests refused with 429 rate-limited, by limit: key (per-key minute), human, operator, log (per address), auth_failures.",
  incremental: true
})
const quotaRejections = Metric.counter("pv_quota_rejections", { description: "Requests refused with 429 quota-exceeded (a key's daily quota).", incremental: true })

export type RateLimitBucket = "key" | "human" | "operator" | "log" | "auth_failures"
const bucketLabels: Record<RateLimitBucket, ReadonlyArray<MetricLabel.MetricLabel>> = {
  key: labels({ limit: "key" }),
  human: labels({ limit: "human" }),
  operator: labels({ limit: "operator" }),
  log: labels({ limit: "log" }),
  auth_failures: labels({ limit: "auth_failures" })
}

export const countRateLimited = (bucket: RateLimitBucket): Effect.Effect<void> =>
  Effect.sync(() => rateLimitRejections.unsafeUpdate(1, bucketLabels[bucket]))

export const countQuotaExceeded: Effect.Effect<void> = Effect.sync(() => quotaRejections.unsafeUpdate(1, noLabels))

const databaseErrors = Metric.counter("pv_db_errors", {
  description: "Requests failed by a database error: unavailable (answered 503) or input (data the database refused, answered 422).",
  incremental: true
})
const databaseErrorLabels = { unavailable: labels({ kind: "unavailable" }), input: labels({ kind: "input" }) }

export const countDatabaseError = (kind: "unavailable" | "input"): void => databaseErrors.unsafeUpdate(1, databaseErrorLabels[kind])

// ---- Transparency log ------------------------------------------------------------------------------

const logEntriesIntegrated = Metric.counter("pv_log_entries_integrated", {
  description: "Entries this instance integrated into the transparency log.",
  incremental: true
})

interface LogState {
  /** Size of the latest checkpoint this instance committed or saw; -1 before the first round. */
  size: number
  /** performance.now() of the oldest entry written here that no completed round has covered yet. */
  oldestWaiting: number | undefined
}

export const logState: LogState = { size: -1, oldestWaiting: undefined }

/** A local write queued a log entry (the integrator's nudge). */
export const logEntryQueued = (): void => {
  if (logState.oldestWaiting === undefined) logState.oldestWaiting = performance.now()
}

/**
 * The integrator's hook. `beginRound` is called as a round starts and returns what `endRound` needs: a
 * round that held the lock covered every entry written before it began (it moves pending entries up to
 * its limit; a full round is followed at once by another), so the waiting mark is cleared unless a
 * write came in during the round.
 */
export const logRoundStarted = (): number | undefined => {
  const waiting = logState.oldestWaiting
  logState.oldestWaiting = undefined
  return waiting
}

export const logRoundEnded = (
  waitingBefore: number | undefined,
  result: { readonly locked: boolean; readonly size: number; readonly appended: number; readonly full: boolean } | undefined
): void => {
  const covered = result !== undefined && result.locked && !result.full
  if (!covered && waitingBefore !== undefined) {
    logState.oldestWaiting = logState.oldestWaiting === undefined ? waitingBefore : Math.min(waitingBefore, logState.oldestWaiting)
  }
  if (result !== undefined && result.locked) {
    logState.size = result.size
    if (result.appended > 0) logEntriesIntegrated.unsafeUpdate(result.appended, noLabels)
  }
}

/** Seconds the oldest entry written here has waited for integration (0: none waiting). */
export const logIntegrationLagSeconds = (): number =>
  logState.oldestWaiting === undefined ? 0 : (performance.now() - logState.oldestWaiting) / 1000

// ---- Database pools --------------------------------------------------------------------------------

/** What the pool gauges read at scrape time. */
export interface ObservedPool {
  readonly totalCount: number
  readonly idleCount: number
  readonly waitingCount: number
}

export interface PoolSource {
  readonly pool: ObservedPool
  /** False while the outage circuit breaker is open (platform/PgPool.ts). */
  readonly answering: () => boolean
}

export const observedPools = new Set<PoolSource>()

/** Registers a pool for the gauges until the returned function is called. */
export const observePool = (source: PoolSource): (() => void) => {
  observedPools.add(source)
  return () => void observedPools.delete(source)
}
