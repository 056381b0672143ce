import { createHash } from "node:crypto"
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Layer } from "effect"
import { MetricsState } from "../../src/observability/Metrics.js"
import { AppConfig } from "../../src/platform/Config.js"
import { DatabaseLive } from "../../src/platform/Database.js"
import { testEnvironment } from "./testConfig.js"

const repository = fileURLToPath(new URL("../../", import.meta.url))

/** The service's database layers (embedded PGlite in `dataDir`, every migration applied) in the test configuration. */
const embeddedDatabase = (dataDir: string) =>
  DatabaseLive.pipe(
    Layer.provideMerge(AppConfig.layerFromEnv({ ...testEnvironment(), PV_DATA_DIR: dataDir })),
    Layer.provideMerge(MetricsState.layer)
  )

/** Names the migrated template: a change to any migration or to PGlite makes a new one. */
const templateKey = (): string => {
  const hash = createHash("sha256")
  hash.update(readFileSync(join(repository, "node_modules/@electric-sql/pglite/package.json")))
  const migrations = join(repository, "migrations")
  for (const file of readdirSync(migrations).sort()) hash.update(file).update(readFileSync(join(migrations, file)))
  return hash.digest("hex").slice(0, 16)
}

/**
 * A data directory with every migration applied, made once per machine (initdb alone is most of a
 * database's start) and copied for each test file. Built aside and renamed into place, so a reader never
 * sees a half-made one; when two workers build it at once, the first rename wins and the other is dropped.
 */
const migratedTemplate = Effect.gen(function*() {
  const template = join(tmpdir(), `pv-service-db-${templateKey()}`)
  if (existsSync(join(template, "pgdata", "PG_VERSION"))) return template
  const building = mkdtempSync(join(tmpdir(), "pv-service-db-building-"))
  // Built (migrated) and closed in a memo map of its own, so the test's database layers are built anew.
  yield* Effect.scoped(Effect.flatMap(Layer.makeMemoMap, (memoMap) =>
    Effect.flatMap(Effect.scope, (scope) => Layer.buildWithMemoMap(embeddedDatabase(building), memoMap, scope))))
  try {
    renameSync(building, template)
  } catch {
    rmSync(building, { recursive: true, force: true })
  }
  return template
})

/**
 * What a service's `layerTest` (e.g. `Receipts.layerTest`) still needs: the test configuration, a metrics
 * state, and a database of its own with every migration applied: embedded PGlite in a temporary data
 * directory (a copy of the migrated template), removed with the layer. No HTTP server, no background loops
 * (sweeper, integrator, deliveries): the test calls the service itself, under @effect/vitest's TestClock.
 */
export const ServiceTestDatabase = Layer.unwrap(
  Effect.gen(function*() {
    const template = yield* migratedTemplate
    const dataDir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "pv-service-test-"))),
      (dataDir) => Effect.sync(() => rmSync(dataDir, { recursive: true, force: true }))
    )
    cpSync(join(template, "pgdata"), join(dataDir, "pgdata"), { recursive: true })
    return embeddedDatabase(dataDir)
  })
)

/** A service's test layer over its own fresh database. */
export const overTestDatabase = <A, E, R>(layer: Layer.Layer<A, E, R>) => layer.pipe(Layer.provideMerge(ServiceTestDatabase))
