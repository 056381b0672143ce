import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { HttpServer } from "@effect/platform"
import { Context, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { testSigningKeyPem } from "../../src/events/Signer.js"
import { testLogSigningKeyPem } from "../../src/log/LogKey.js"
import { ServerLive } from "../../src/http/Server.js"
import { AppConfigFrom, type AppConfigShape } from "../../src/platform/Config.js"
import { createScratchDatabase, testDatabaseKind, type TestDatabaseKind } from "./databases.js"
import { ShiftableClock } from "./ShiftableClock.js"

export const testOperatorToken = "op_test_0123456789abcdefghijklmnopqrstuvwxyz"

export interface TestServer {
  readonly baseUrl: string
  readonly database: TestDatabaseKind
  readonly operatorToken: string
  readonly clock: ShiftableClock
  /** The database URL the server uses (postgres only), for a second process sharing it. */
  readonly databaseUrl: string | undefined
  /** Run an effect against this server's own services (same database, clock and keys), e.g. a sweep. */
  readonly run: <A, E>(effect: Effect.Effect<A, E, Layer.Layer.Success<typeof ServerLive>>) => Promise<A>
  readonly close: () => Promise<void>
}

export interface StartOptions {
  readonly database?: TestDatabaseKind
  readonly config?: Partial<AppConfigShape>
  /** Start against an existing database instead of a fresh one (e.g. a second instance). */
  readonly databaseUrl?: string
}

/**
 * Starts the real server layers (HttpApi, services, migrations, database) on a random loopback port,
 * on PGlite in a temporary directory or on a fresh PostgreSQL database, with a clock the test moves.
 */
export const startTestServer = async (options: StartOptions = {}): Promise<TestServer> => {
  const database = options.database ?? testDatabaseKind()
  const clock = new ShiftableClock()
  const dataDir = mkdtempSync(join(tmpdir(), "pv-test-"))
  const scratch = options.databaseUrl === undefined && database === "postgres" ? await createScratchDatabase() : undefined
  const databaseUrl = options.databaseUrl ?? scratch?.url
  const config = AppConfigFrom({
    port: 0,
    host: "127.0.0.1",
    dataDir,
    databaseUrl: databaseUrl === undefined ? Option.none() : Option.some(Redacted.make(databaseUrl)),
    operatorToken: Option.some(Redacted.make(testOperatorToken)),
    loadDemoData: false,
    banner: false,
    // Suites share 127.0.0.1; the per-address limits get their own tests with low values.
    humanRateLimitPerMinute: 100_000,
    operatorRateLimitPerMinute: 100_000,
    authFailureLimitPerMinute: 100_000,
    // PostgreSQL mode refuses to start without a configured key; every test server signs with the test key.
    eventSigningKey: Option.some(Redacted.make(testSigningKeyPem())),
    logSigningKey: Option.some(Redacted.make(testLogSigningKeyPem())),
    ...options.config
  })
  const layer = ServerLive.pipe(Layer.provide(config), Layer.provide(Layer.setClock(clock)))
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope).pipe(Effect.withClock(clock)))
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")
  return {
    baseUrl: `http://127.0.0.1:${address.port}`,
    database,
    operatorToken: testOperatorToken,
    clock,
    databaseUrl,
    run: (effect) => Effect.runPromise(effect.pipe(Effect.provide(context), Effect.withClock(clock))),
    close: async () => {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await scratch?.drop()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
}
