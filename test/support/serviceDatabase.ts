import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer } from "effect"
import { MetricsState } from "../../src/observability/Metrics.js"
import { AppConfig } from "../../src/platform/Config.js"
import { DatabaseLive } from "../../src/platform/Database.js"
import { testEnvironment } from "./testConfig.js"

/**
 * What a service's `layerTest` (e.g. `Receipts.layerTest`) still needs: the test configuration, a metrics
 * state, and a database with every migration applied: embedded PGlite in a temporary data directory,
 * removed with the layer. No HTTP server, no background loops (sweeper, integrator, deliveries): the
 * test calls the service itself, under the clock @effect/vitest gives it (TestClock).
 */
export const ServiceTestDatabase = Layer.unwrap(
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "pv-service-test-"))),
      (dataDir) => Effect.sync(() => rmSync(dataDir, { recursive: true, force: true }))
    ),
    (dataDir) =>
      DatabaseLive.pipe(
        Layer.provideMerge(AppConfig.layerFromEnv({ ...testEnvironment(), PV_DATA_DIR: dataDir })),
        Layer.provideMerge(MetricsState.layer)
      )
  )
)

/** A service's test layer over its own fresh database. */
export const overTestDatabase = <A, E, R>(layer: Layer.Layer<A, E, R>) => layer.pipe(Layer.provideMerge(ServiceTestDatabase))
