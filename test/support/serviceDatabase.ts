import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer } from "effect"
import { copyMigratedPglite, testDatabaseLayers } from "./templates.js"

/**
 * What a service's `layerTest` (e.g. `Receipts.layerTest`) still needs: the test configuration, a metrics
 * state, and a database of its own with every migration applied: embedded PGlite in a temporary data
 * directory (a copy of the migrated template, support/templates.ts), removed with the layer. No HTTP
 * server, no background loops (sweeper, integrator, deliveries): the test calls the service itself, under
 * @effect/vitest's TestClock.
 */
export const ServiceTestDatabase = Layer.unwrap(
  Effect.gen(function*() {
    const dataDir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "pv-service-test-"))),
      (dataDir) => Effect.sync(() => rmSync(dataDir, { recursive: true, force: true }))
    )
    yield* copyMigratedPglite(dataDir)
    return testDatabaseLayers({ PV_DATA_DIR: dataDir })
  })
)

/** A service's test layer over its own fresh database. */
export const overTestDatabase = <A, E, R>(layer: Layer.Layer<A, E, R>) => layer.pipe(Layer.provideMerge(ServiceTestDatabase))
