import { generateKeyPairSync } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Clock, ConfigProvider, Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpServer } from "effect/http"
import { AppConfig, baseAppConfig } from "../../src/platform/Config.js"
import { Witness } from "../../src/witness/Witness.js"
import { WitnessServerLive } from "../../src/witness/WitnessServer.js"
import { testDatabaseKind, type TestDatabaseKind } from "./databases.js"
import { ShiftableClock } from "./ShiftableClock.js"
import { copyMigratedPglite, createMigratedDatabase } from "./templates.js"
import { testConfigProvider, testEnvironment } from "./testConfig.js"

export interface TestWitness {
  readonly baseUrl: string
  readonly name: string
  readonly verifierKey: string
  readonly clock: ShiftableClock
  readonly close: () => Promise<void>
}

/**
 * `pv witness serve`'s real layers (front door, routes, witness, migrations, database) on a random
 * loopback port, on PGlite in a temporary directory or a fresh PostgreSQL database (copies of the migrated
 * template, support/templates.ts), trusting `logs` (note verifier keys). `env` adds or overrides settings (PV_WITNESS_NAME, PV_WITNESS_SIGNING_KEY, …).
 */
export const startTestWitness = async (logs: ReadonlyArray<string>, env: Record<string, string> = {}, database: TestDatabaseKind = testDatabaseKind()): Promise<TestWitness> => {
  const clock = new ShiftableClock()
  const dataDir = mkdtempSync(join(tmpdir(), "pv-witness-"))
  const scratch = database === "postgres" ? await createMigratedDatabase() : undefined
  if (scratch === undefined) await Effect.runPromise(copyMigratedPglite(dataDir))
  const { PV_EVENT_SIGNING_KEY: _e, PV_LOG_SIGNING_KEY: _l, PV_WEBHOOK_SIGNING_KEY: _w, ...base } = testEnvironment()
  const full = {
    ...base,
    PORT: "0",
    HOST: "127.0.0.1",
    PV_DATA_DIR: dataDir,
    PV_WITNESS_NAME: "witness.test/w1",
    PV_WITNESS_LOGS: logs.join(","),
    ...(scratch === undefined ? {} : { DATABASE_URL: scratch.url, PV_WITNESS_SIGNING_KEY: env.PV_WITNESS_SIGNING_KEY ?? generatedPem() }),
    ...env
  }
  const provider = testConfigProvider(full)
  const layer = WitnessServerLive.pipe(
    Layer.provide(Layer.effect(AppConfig, Effect.orDie(baseAppConfig))),
    Layer.provide(Layer.succeed(Clock.Clock, clock)),
    Layer.provide(ConfigProvider.layer(provider))
  )
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(
    Layer.buildWithScope(layer, scope).pipe(Effect.provideService(Clock.Clock, clock), Effect.provideService(ConfigProvider.ConfigProvider, provider))
  )
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
  const witness = Context.get(context, Witness)
  return {
    baseUrl: `http://127.0.0.1:${address.port}`,
    name: witness.key.name,
    verifierKey: witness.key.verifier_key,
    clock,
    close: async () => {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await scratch?.drop()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
}

const generatedPem = () => generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString()
