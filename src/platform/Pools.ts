import { Context, Layer } from "effect"

/** What the pool gauges read at scrape time (observability/Metrics.ts). */
export interface ObservedPool {
  readonly totalCount: number
  readonly idleCount: number
}

export interface PoolSource {
  readonly pool: ObservedPool
  /** False while the outage circuit breaker is open (platform/PgPool.ts). */
  readonly answering: () => boolean
}

export interface DatabasePoolsShape {
  /** The pools open now. */
  readonly sources: ReadonlySet<PoolSource>
  /** Registers a pool until the returned function is called. */
  readonly observe: (source: PoolSource) => () => void
}

export const makeDatabasePools = (): DatabasePoolsShape => {
  const sources = new Set<PoolSource>()
  return {
    sources,
    observe: (source) => {
      sources.add(source)
      return () => void sources.delete(source)
    }
  }
}

/**
 * The database pools of one server: the database layer registers each pool it opens, the metrics
 * (observability/Metrics.ts `MetricsState`) read them at scrape time, so the platform never imports the
 * metrics. One per build of a server's layers (layers are shared within a build).
 */
export class DatabasePools extends Context.Service<DatabasePools, DatabasePoolsShape>()("pv/DatabasePools") {
  static readonly layer: Layer.Layer<DatabasePools> = Layer.sync(this, makeDatabasePools)
}
