import pg from "pg"

export interface PgPoolOptions {
  readonly url: string
  readonly maxConnections: number
  readonly applicationName: string
  /** Last resort: a statement with no answer after this long fails and its connection is dropped. */
  readonly queryTimeoutMs: number
  /** Opening one connection fails after this long. */
  readonly connectTimeoutMs: number
}

/** How often the database is asked `SELECT 1` on a connection of its own, and how long it may take. */
export const ProbeIntervalMs = 250
export const ProbeTimeoutMs = 750
/** Waiting for a free connection of the pool (writers queued on one row lock can hold them all). */
const AcquireTimeoutMs = 5_000

const unavailable = () => new Error("the database is not answering")

export interface PgPool {
  readonly pool: pg.Pool
  /** False while the probe finds the database unreachable or silent. */
  readonly answering: () => boolean
  readonly end: () => Promise<void>
}

/**
 * The pool behind `@effect/sql-pg` for a real PostgreSQL, with a circuit breaker so a request that needs
 * an unavailable database fails fast (503) instead of waiting on it (CONTRACT section 11). A statement
 * waiting on a row lock and a statement sent into a network black hole look the same from here (no
 * answer yet), so a per-statement time-out cannot tell contention from an outage. A probe on its own
 * connection can: while it gets no answer, every connection is dropped (statements in flight fail at
 * once) and new statements and connections fail without trying; the first answer closes the circuit.
 */
export const makePgPool = (options: PgPoolOptions): PgPool => {
  let answering = true
  const clients = new Set<pg.Client>()

  const destroy = (client: pg.Client, error: Error) =>
    (client as unknown as { connection: { stream: { destroy: (e: Error) => void } } }).connection.stream.destroy(error)

  class GuardedClient extends pg.Client {
    constructor(config: pg.ClientConfig) {
      super({ ...config, connectionTimeoutMillis: options.connectTimeoutMs })
      clients.add(this)
      this.once("end", () => clients.delete(this))
    }

    override connect(...args: Array<unknown>): any {
      const callback = args[0]
      if (!answering && typeof callback === "function") return void setImmediate(() => callback(unavailable()))
      return (super.connect as (...a: Array<unknown>) => unknown)(...args)
    }

    override query(...args: Array<unknown>): any {
      const last = args.length - 1
      const callback = args[last]
      if (typeof callback !== "function") return (super.query as (...a: Array<unknown>) => unknown)(...args)
      if (!answering) return void setImmediate(() => callback(unavailable()))
      args[last] = (error: Error | null, result: unknown) => {
        callback(error, result)
        // node-postgres fails a timed-out statement but keeps its connection, which would then hold every
        // later statement behind it: drop it (after the caller released it, so the pool discards it).
        if (error?.message === "Query read timeout") setImmediate(() => destroy(this, error))
      }
      return (super.query as (...a: Array<unknown>) => unknown)(...args)
    }
  }

  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.maxConnections,
    application_name: options.applicationName,
    connectionTimeoutMillis: AcquireTimeoutMs,
    query_timeout: options.queryTimeoutMs,
    keepAlive: true,
    Client: GuardedClient as unknown as typeof pg.Client
  })
  // A connection that fails while idle is removed by the pool; nothing is waiting on it.
  pool.on("error", () => {})

  let probeClient: pg.Client | undefined
  let stopped = false
  const trip = () => {
    if (!answering) return
    answering = false
    for (const client of clients) destroy(client, unavailable())
  }
  const probeOnce = async () => {
    try {
      if (probeClient === undefined) {
        const fresh = new pg.Client({
          connectionString: options.url,
          application_name: `${options.applicationName}-probe`,
          connectionTimeoutMillis: ProbeTimeoutMs,
          query_timeout: ProbeTimeoutMs
        })
        fresh.on("error", () => {})
        probeClient = fresh
        await fresh.connect()
      }
      await probeClient.query("SELECT 1")
      answering = true
    } catch {
      const failed = probeClient
      probeClient = undefined
      failed?.end().catch(() => {})
      if (failed !== undefined) destroy(failed, unavailable())
      trip()
    }
  }
  const loop = async () => {
    while (!stopped) {
      await probeOnce()
      await new Promise((resolve) => setTimeout(resolve, ProbeIntervalMs).unref())
    }
  }
  void loop()

  return {
    pool,
    answering: () => answering,
    end: async () => {
      stopped = true
      await probeClient?.end().catch(() => {})
      await pool.end()
    }
  }
}
