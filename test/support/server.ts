import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Clock, ConfigProvider, Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpServer } from "effect/http"
import { ServerLive } from "../../src/app/Server.js"
import { AppConfig, type AppConfigShape } from "../../src/platform/Config.js"
import { testDatabaseKind, type TestDatabaseKind } from "./databases.js"
import { ShiftableClock } from "./ShiftableClock.js"
import { copyMigratedPglite, createMigratedDatabase } from "./templates.js"
import { testConfigProvider, testEnvironment, testOperatorToken } from "./testConfig.js"

export { testOperatorToken }

export interface TestServer {
  readonly baseUrl: string
  readonly database: TestDatabaseKind
  readonly operatorToken: string
  readonly clock: ShiftableClock
  /** The database URL the server uses (postgres only), for a second process sharing it. */
  readonly databaseUrl: string | undefined
  /** Run an effect against this server's own services (same database, clock, keys and configuration), e.g. a sweep. */
  readonly run: <A, E>(effect: Effect.Effect<A, E, Layer.Success<typeof ServerLive>>) => Promise<A>
  readonly close: () => Promise<void>
}

export interface StartOptions {
  readonly database?: TestDatabaseKind
  /** Settings over the ones the server reads from its test environment (support/testConfig.ts). */
  readonly config?: Partial<AppConfigShape>
  /** Start against an existing database instead of a fresh one (e.g. a second instance). */
  readonly databaseUrl?: string
}

/**
 * Starts the real server layers (HttpApi, services, migrations, database) on a random loopback port,
 * on PGlite in a temporary directory or on a fresh PostgreSQL database (both copies of a migrated
 * template, support/templates.ts, so the server's migrations find nothing to do), with a clock the test moves.
 * Its configuration comes from a ConfigProvider built here (the test environment, then `config`), so
 * nothing the server reads comes from the developer's environment. Each build of `ServerLive` makes its
 * own MetricsState (observability/Metrics.ts), so servers started side by side here never share it.
 */
export const startTestServer = async (options: StartOptions = {}): Promise<TestServer> => {
  const database = options.database ?? testDatabaseKind()
  const clock = new ShiftableClock()
  const dataDir = mkdtempSync(join(tmpdir(), "pv-test-"))
  // A fresh database, already migrated: a copy of the migrated template (support/templates.ts).
  const scratch = options.databaseUrl === undefined && database === "postgres" ? await createMigratedDatabase() : undefined
  // Embedded: the data directory the server will use (a test may name its own) gets the template's copy,
  // unless it already holds a database (a restart on the same directory).
  const embeddedDir = options.config?.dataDir ?? dataDir
  if (database === "pglite" && options.databaseUrl === undefined && !existsSync(join(embeddedDir, "pgdata"))) {
    await Effect.runPromise(copyMigratedPglite(embeddedDir))
  }
  const databaseUrl = options.databaseUrl ?? scratch?.url
  const env = {
    ...testEnvironment(),
    PORT: "0",
    HOST: "127.0.0.1",
    PV_DATA_DIR: dataDir,
    ...(databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl })
  }
  // The same environment for AppConfig and for anything else that reads a Config.
  const provider = testConfigProvider(env)
  const layer = ServerLive.pipe(
    Layer.provide(AppConfig.layerFromEnv(env, options.config ?? {})),
    Layer.provide(Layer.succeed(Clock.Clock, clock)),
    Layer.provide(ConfigProvider.layer(provider))
  )
  // Everything built or run for this server sees its clock and its ConfigProvider.
  const withServerServices = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.provideService(Clock.Clock, clock), Effect.provideService(ConfigProvider.ConfigProvider, provider))
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(withServerServices(Layer.buildWithScope(layer, scope)))
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
  return {
    baseUrl: `http://127.0.0.1:${address.port}`,
    database,
    operatorToken: testOperatorToken,
    clock,
    databaseUrl,
    run: (effect) => Effect.runPromise(withServerServices(effect.pipe(Effect.provide(context)))),
    close: async () => {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await scratch?.drop()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
}
