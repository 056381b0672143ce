import { mkdirSync } from "node:fs"
import { resolve } from "node:path"
import { NodeContext } from "@effect/platform-node"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import pg from "pg"
import { migrations } from "../../migrations/index.js"
import { AppConfig } from "./Config.js"
import { makePgPool } from "./PgPool.js"
import { observePool } from "../observability/Metrics.js"

/** Where the database lives: a real PostgreSQL from DATABASE_URL, or PGlite embedded in the data directory. */
export class DatabaseMode extends Context.Tag("pv/DatabaseMode")<
  DatabaseMode,
  { readonly kind: "postgres" } | { readonly kind: "embedded"; readonly dataDir: string }
>() {}

/** The highest migration id shipped: readiness requires the database to have reached it. */
export const latestMigrationId = Math.max(...Object.keys(migrations).map((file) => Number(/^(\d+)_/.exec(file)?.[1] ?? 0)))

/**
 * PGlite is single-connection: the socket server and the pool both allow exactly one connection, so
 * protocol messages of two clients are never interleaved; transactions queue on the pool instead.
 */
const embeddedPostgres = (dataDir: string) =>
  Effect.gen(function*() {
    const directory = resolve(dataDir)
    mkdirSync(directory, { recursive: true, mode: 0o700 })
    // Loaded only here: a PostgreSQL deployment never pays for the embedded engine.
    const { PGlite } = yield* Effect.promise(() => import("@electric-sql/pglite"))
    const { PGLiteSocketServer } = yield* Effect.promise(() => import("@electric-sql/pglite-socket"))
    const db = yield* Effect.acquireRelease(
      Effect.promise(() => PGlite.create(resolve(directory, "pgdata"))),
      (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
    )
    const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 1 })
    yield* Effect.acquireRelease(
      Effect.promise(() => server.start()),
      () => Effect.promise(() => server.stop())
    )
    const port = Number(server.getServerConn().split(":").pop())
    // The pool is made here (as PgClient.layer would) so the metrics can observe it.
    return PgClient.layerFromPool({
      acquire: Effect.acquireRelease(
        Effect.sync(() => {
          const pool = new pg.Pool({
            host: "127.0.0.1",
            port,
            user: "postgres",
            database: "postgres",
            max: 1,
            idleTimeoutMillis: Duration.toMillis(Duration.hours(24)),
            application_name: "pv-embedded"
          })
          pool.on("error", () => {})
          return { pool, unobserve: observePool({ pool, answering: () => true }) }
        }),
        ({ pool, unobserve }) => Effect.sync(unobserve).pipe(Effect.zipRight(Effect.promise(() => pool.end())), Effect.timeoutOption("1 second"))
      ).pipe(Effect.map(({ pool }) => pool)),
      applicationName: "pv-embedded"
    })
  })

const clientLayer = Layer.unwrapScoped(
  Effect.gen(function*() {
    const config = yield* AppConfig
    if (Option.isSome(config.databaseUrl)) {
      const url = Redacted.value(config.databaseUrl.value)
      return Layer.merge(
        PgClient.layerFromPool({
          acquire: Effect.acquireRelease(
            Effect.sync(() => {
              const guarded = makePgPool({
                url,
                maxConnections: 16,
                applicationName: "pv-trust",
                queryTimeoutMs: config.dbQueryTimeoutMs,
                connectTimeoutMs: config.dbConnectTimeoutMs
              })
              return { guarded, unobserve: observePool(guarded) }
            }),
            ({ guarded, unobserve }) => Effect.sync(unobserve).pipe(Effect.zipRight(Effect.promise(() => guarded.end())), Effect.timeoutOption("2 seconds"))
          ).pipe(Effect.map(({ guarded }) => guarded.pool)),
          applicationName: "pv-trust"
        }),
        Layer.succeed(DatabaseMode, { kind: "postgres" })
      )
    }
    const client = yield* embeddedPostgres(config.dataDir)
    return Layer.merge(client, Layer.succeed(DatabaseMode, { kind: "embedded", dataDir: resolve(config.dataDir) }))
  })
)

export const MigrationsLive = PgMigrator.layer({
  loader: PgMigrator.fromGlob(migrations)
}).pipe(Layer.provide(NodeContext.layer))

/** SqlClient + PgClient with every migration applied before anything else can use them. */
export const DatabaseLive = Layer.provideMerge(MigrationsLive, clientLayer)

export type Database = SqlClient.SqlClient | PgClient.PgClient | DatabaseMode
