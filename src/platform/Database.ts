import { execFile } from "node:child_process"
import { existsSync, mkdirSync } from "node:fs"
import { createRequire } from "node:module"
import { resolve } from "node:path"
import { setFlagsFromString } from "node:v8"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { Migrator, type SqlClient } from "effect/sql"
import { migrations } from "../../migrations/index.js"
import { AppConfig } from "./Config.js"
import { makePgPool, makeSockets } from "./PgPool.js"
import { DatabasePools, type DatabasePoolsShape } from "./Pools.js"

export type DatabaseModeShape = { readonly kind: "postgres" } | { readonly kind: "embedded"; readonly dataDir: string }

/** Where the database lives: a real PostgreSQL from DATABASE_URL, or PGlite embedded in the data directory. */
export class DatabaseMode extends Context.Service<DatabaseMode, DatabaseModeShape>()("pv/DatabaseMode") {}

/** The highest migration id shipped: readiness requires the database to have reached it. */
export const latestMigrationId = Math.max(...Object.keys(migrations).map((file) => Number(/^(\d+)_/.exec(file)?.[1] ?? 0)))

/**
 * The name `effect/sql` gives every statement's span here (the database namespace, `db.namespace`): the
 * driver is given no database name or user of its own (they come from the URL), so it is the default one.
 * Tracing renames these spans `sql.execute` (observability/Tracing.ts).
 */
export const StatementSpanName = "postgres"

/**
 * Memory of the embedded engine (docs/PERFORMANCE.md, "Memory"): PostgreSQL's own buffer pool is
 * 16 MB instead of 128 MB (the WebAssembly heap then stays near its 128 MB floor; the OS caches the data
 * files), and V8 keeps PGlite's WebAssembly on its baseline compiler (Liftoff) instead of also compiling
 * every hot function again with TurboFan: that second copy of a PostgreSQL build costs ~100 MB of code, and
 * the measured query rate did not drop. Set only here, so a PostgreSQL deployment never changes V8's flags.
 */
const embeddedSettings: ReadonlyArray<string> = ["shared_buffers = 16MB", "temp_buffers = 2MB", "wal_buffers = 1MB"]

/**
 * A new data directory is made (initdb) in a short-lived child process: initdb runs a second WebAssembly
 * instance whose memory V8 frees but the process keeps (a first start idled ~90 MB above a restart).
 */
const initializeDataDirectory = (pgdata: string) =>
  Effect.callback<void>((resume) => {
    const pglite = createRequire(import.meta.url).resolve("@electric-sql/pglite")
    const script = "const { PGlite } = require(process.argv[1]); PGlite.create(process.argv[2]).then((db) => db.close())"
    execFile(process.execPath, ["--liftoff-only", "-e", script, pglite, pgdata], { timeout: 120_000 }, (error, _stdout, stderr) =>
      resume(error === null ? Effect.void : Effect.die(new Error(`could not initialise the embedded database in ${pgdata}: ${stderr || error.message}`))))
  })

/**
 * PGlite is single-connection: the socket server and the pool both allow exactly one connection, so
 * protocol messages of two clients are never interleaved; transactions queue on the pool instead. (Nothing
 * may hold that connection for long: LISTEN is only used on PostgreSQL.)
 */
const embeddedPostgres = (dataDir: string, observePool: DatabasePoolsShape["observe"]) =>
  Effect.gen(function*() {
    const directory = resolve(dataDir)
    mkdirSync(directory, { recursive: true, mode: 0o700 })
    // Loaded only here: a PostgreSQL deployment never pays for the embedded engine.
    const pgdata = resolve(directory, "pgdata")
    if (!existsSync(resolve(pgdata, "PG_VERSION"))) yield* initializeDataDirectory(pgdata)
    setFlagsFromString("--liftoff-only")
    const { PGlite } = yield* Effect.promise(() => import("@electric-sql/pglite"))
    const { PGLiteSocketServer } = yield* Effect.promise(() => import("@electric-sql/pglite-socket"))
    const db = yield* Effect.acquireRelease(
      Effect.promise(() => PGlite.create(pgdata, { postgresqlconf: [...embeddedSettings] })),
      (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
    )
    // The pool below holds one connection. The server accepts more (8) so that the pool's replacement of a
    // discarded connection (after an interrupted statement) is not refused ("Too many connections", seen by the
    // driver as "Connection closed during startup", a 503) while the server has not yet processed the old
    // ones' close, which it does a tick later: with room for one (2 in all), a burst of clients closing their
    // requests (the fuzz suite's raw sockets) still got refusals, one replacement after another. They never run
    // at once: the server's query queue runs one statement at a time and keeps an open transaction's
    // connection alone until it ends or is rolled back.
    const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 8 })
    yield* Effect.acquireRelease(
      Effect.promise(() => server.start()),
      () => Effect.promise(() => server.stop())
    )
    const port = Number(server.getServerConn().split(":").pop())
    // The connections go through `makeSockets` so the pool gauges can count them.
    const sockets = makeSockets({ host: "127.0.0.1", port })
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        observePool({
          pool: {
            get totalCount() {
              return sockets.count()
            },
            get idleCount() {
              return sockets.count() - sockets.busy()
            }
          },
          answering: () => true
        })
      ),
      (unobserve) => Effect.sync(unobserve)
    )
    return PgClient.layer({
      host: "127.0.0.1",
      port,
      username: "postgres",
      stream: sockets.open,
      maxConnections: 1,
      idleTimeout: "24 hours",
      applicationName: "pv-embedded"
    })
  })

/** A real PostgreSQL behind the circuit breaker of platform/PgPool.ts. */
const postgres = (url: string, config: typeof AppConfig.Service, observePool: DatabasePoolsShape["observe"]) =>
  Effect.gen(function*() {
    const guarded = yield* makePgPool({ url, applicationName: "pv-trust", queryTimeoutMs: config.dbQueryTimeoutMs })
    yield* Effect.acquireRelease(Effect.sync(() => observePool(guarded)), (unobserve) => Effect.sync(unobserve))
    return PgClient.layer({
      url: Redacted.make(url),
      stream: guarded.stream,
      maxConnections: config.dbPoolSize,
      // Statements outside a transaction share connections, pipelined: written together, no round trip each
      // (the driver's own pipeline; a transaction still has its connection to itself until it ends).
      multiplex: true,
      applicationName: "pv-trust",
      connectTimeout: config.dbConnectTimeoutMs
    })
  })

const clientLayer = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const { observe: observePool } = yield* DatabasePools
    if (Option.isSome(config.databaseUrl)) {
      const client = yield* postgres(Redacted.value(config.databaseUrl.value), config, observePool)
      return Layer.merge(client, Layer.succeed(DatabaseMode, { kind: "postgres" }))
    }
    const client = yield* embeddedPostgres(config.dataDir, observePool)
    return Layer.merge(client, Layer.succeed(DatabaseMode, { kind: "embedded", dataDir: resolve(config.dataDir) }))
  })
)

/** Every migration of migrations/index.ts not yet applied (table `effect_sql_migrations`), in order. */
export const MigrationsLive = Layer.effectDiscard(Migrator.make({})({ loader: Migrator.fromGlob(migrations) }))

/**
 * SqlClient + PgClient with every migration applied before anything else can use them. Its pools are
 * registered in the server's DatabasePools (the one instance of its build, which the metrics read: ./Pools.ts).
 */
export const DatabaseLive = Layer.provideMerge(MigrationsLive, clientLayer).pipe(Layer.provide(DatabasePools.layer))

export type Database = SqlClient.SqlClient | PgClient.PgClient | DatabaseMode
