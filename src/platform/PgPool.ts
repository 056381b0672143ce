import { connect, type Socket } from "node:net"
import { Duplex } from "node:stream"
import { PgConnection } from "@effect/sql-pg"
import { Effect, Exit, Redacted, Scope } from "effect"
import type { ObservedPool } from "./Pools.js"

export interface PgPoolOptions {
  readonly url: string
  readonly applicationName: string
  /** Last resort: a statement with no answer after this long fails and its connection is dropped. */
  readonly queryTimeoutMs: number
}

/** How often the database is asked `SELECT 1` on a connection of its own, and how long it may take. */
export const ProbeIntervalMs = 250
export const ProbeTimeoutMs = 750

const unavailable = () => new Error("the database is not answering")

/** Where a `postgres://` URL points (the driver reads the rest of it: user, password, database, TLS). */
export interface Target {
  readonly host: string
  readonly port: number
}

export const targetOf = (url: string): Target => {
  const parsed = new URL(url)
  const port = Number(parsed.port || parsed.searchParams.get("port") || 5432)
  const hostname = parsed.hostname.startsWith("[") ? parsed.hostname.slice(1, -1) : decodeURIComponent(parsed.hostname)
  return { host: hostname || parsed.searchParams.get("host") || "localhost", port }
}

const openSocket = (target: Target): Socket =>
  target.host.startsWith("/")
    ? connect({ path: `${target.host}/.s.PGSQL.${target.port}` })
    : connect({ host: target.host, port: target.port, noDelay: true, keepAlive: true })

/** A connection that fails as soon as the driver listens to it (the circuit is open). */
const refusedSocket = (): Duplex => {
  const socket = new Duplex({ read() {}, write(_chunk, _encoding, callback) { callback() } })
  socket.on("error", () => {})
  process.nextTick(() => socket.destroy(unavailable()))
  return socket
}

/**
 * The connections one driver opens (its `stream` option), counted for the pool gauges. With
 * `answerTimeoutMs`, a connection whose latest statement has had no byte of answer for that long is
 * destroyed: the statement fails, and the pool replaces the connection. (Over TLS the driver wraps the
 * socket and this time-out does not see its traffic; the probe still guards against outages.)
 */
export interface Sockets {
  /** The driver's `stream` option. */
  readonly open: () => Duplex
  /** Connections open now. */
  readonly count: () => number
  /** Connections open now that wait on an answer to what was last written. */
  readonly busy: () => number
  /** Destroys every connection open now: their statements fail at once. */
  readonly destroyAll: () => void
}

export const makeSockets = (
  target: Target,
  options: {
    readonly answerTimeoutMs?: number | undefined
    readonly refuse?: (() => boolean) | undefined
    /** Called on the first bytes the database sends on a connection opened while it is set. */
    readonly onFirstAnswer?: (() => void) | undefined
  } = {}
): Sockets => {
  const sockets = new Set<Socket>()
  let busy = 0
  return {
    open: () => {
      if (options.refuse?.()) return refusedSocket()
      const socket = openSocket(target)
      // Also after the driver let go of it: a connection destroyed here must never raise an unhandled error.
      socket.on("error", () => {})
      sockets.add(socket)
      let awaiting = false
      let timer: ReturnType<typeof setTimeout> | undefined
      const settle = () => {
        if (!awaiting) return
        awaiting = false
        busy--
        clearTimeout(timer)
      }
      const write = socket.write
      socket.write = function(this: Socket, ...args: Array<unknown>) {
        if (!awaiting && !socket.destroyed) {
          awaiting = true
          busy++
          if (options.answerTimeoutMs !== undefined) {
            timer = setTimeout(() => socket.destroy(new Error("the database did not answer in time")), options.answerTimeoutMs).unref()
          }
        }
        return (write as (...a: Array<unknown>) => boolean).apply(this, args)
      } as Socket["write"]
      socket.on("data", settle)
      if (options.onFirstAnswer !== undefined) socket.once("data", options.onFirstAnswer)
      socket.once("close", () => {
        settle()
        sockets.delete(socket)
      })
      return socket
    },
    count: () => sockets.size,
    busy: () => busy,
    destroyAll: () => {
      for (const socket of sockets) socket.destroy(unavailable())
    }
  }
}

export interface PgPool {
  /** PgClient's `stream` option for the pool's connections. */
  readonly stream: () => Duplex
  /** False while the probe finds the database unreachable or silent. */
  readonly answering: () => boolean
  /** What the pool gauges read (observability/Metrics.ts). */
  readonly pool: ObservedPool
}

/**
 * The transport under `@effect/sql-pg`'s pool for a real PostgreSQL, with a circuit breaker so a request
 * that needs an unavailable database fails fast (503) instead of waiting on it (docs/API.md §13). A
 * statement waiting on a row lock and a statement sent into a network black hole look the same from here
 * (no answer yet), so a per-statement time-out cannot tell contention from an outage. A probe on its own
 * connection can: while it gets no answer, every connection is destroyed (statements in flight fail at
 * once) and new connections fail without trying; the first answer closes the circuit. The probe runs on
 * the live clock, outside the application's fibers, until the scope closes.
 *
 * The circuit is armed by the database's first answer, to the probe or on a pool connection: an outage is a
 * database that answered and stopped. Before that (the start), a probe without an answer trips nothing, so a
 * database slow to accept its first connections (a busy host) delays the start instead of failing it; the
 * pool's own time-outs (PV_DB_CONNECT_TIMEOUT_MS, PV_DB_QUERY_TIMEOUT_MS) still fail the start when it does not
 * answer. Only a probe begun after the arming can trip: one begun while the database was still silent may time
 * out just as it answers the pool. Arming on the pool's answers too keeps the breaker working where the probe
 * could never connect (a connection limit the pool fills): the circuit then opens, visibly, as it always did.
 */
export const makePgPool = (options: PgPoolOptions): Effect.Effect<PgPool, never, Scope.Scope> =>
  Effect.gen(function*() {
    const target = targetOf(options.url)
    let answering = true
    // performance.now() of the database's first answer (to the probe or on a pool connection); until then no trip.
    let armedAt: number | undefined
    const arm = () => {
      armedAt ??= performance.now()
    }
    const pool = makeSockets(target, { answerTimeoutMs: options.queryTimeoutMs, refuse: () => !answering, onFirstAnswer: arm })
    const probeSockets = makeSockets(target)

    const trip = () => {
      if (!answering) return
      answering = false
      pool.destroyAll()
    }

    let probe: { readonly scope: Scope.Closeable; readonly connection: PgConnection.PgConnection } | undefined
    const dropProbe = () => {
      if (probe !== undefined) Effect.runFork(Scope.close(probe.scope, Exit.void))
      probe = undefined
      probeSockets.destroyAll()
    }
    const probeOnce = async () => {
      const startedAt = performance.now()
      try {
        if (probe === undefined) {
          const scope = Effect.runSync(Scope.make())
          const connection = await Effect.runPromise(
            PgConnection.make({
              url: Redacted.make(options.url),
              applicationName: `${options.applicationName}-probe`,
              connectTimeout: ProbeTimeoutMs,
              stream: probeSockets.open
            }).pipe(Effect.provideService(Scope.Scope, scope), Effect.onError(() => Scope.close(scope, Exit.void)))
          )
          probe = { scope, connection }
        }
        // No answer in time: the probe's connection is destroyed, which fails the statement at once.
        const timer = setTimeout(probeSockets.destroyAll, ProbeTimeoutMs)
        try {
          await Effect.runPromise(probe.connection.query("SELECT 1"))
        } finally {
          clearTimeout(timer)
        }
        answering = true
        arm()
      } catch {
        dropProbe()
        if (armedAt !== undefined && startedAt >= armedAt) trip()
      }
    }

    let stopped = false
    let wake: (() => void) | undefined
    const loop = async () => {
      while (!stopped) {
        await probeOnce()
        if (stopped) break
        await new Promise<void>((resolve) => {
          wake = resolve
          setTimeout(resolve, ProbeIntervalMs).unref()
        })
      }
      dropProbe()
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => loop()),
      (done) =>
        Effect.promise(() => {
          stopped = true
          wake?.()
          return done
        }).pipe(Effect.timeoutOption("1 second"))
    )

    return {
      stream: pool.open,
      answering: () => answering,
      pool: {
        get totalCount() {
          return pool.count()
        },
        get idleCount() {
          return pool.count() - pool.busy()
        }
      }
    }
  })
