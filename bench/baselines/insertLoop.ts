// Baseline (c): single-row durable INSERTs through the same driver (@effect/sql-pg, the same pool settings),
// `connections` at a time for `seconds`: the database's ceiling. Prints {"rows_per_second": …}.
import { PgClient } from "@effect/sql-pg"
import { Clock, Effect, Layer, Option, Redacted } from "effect"
import { AppConfigFrom } from "../../src/platform/Config.js"
import { DatabaseLive } from "../../src/platform/Database.js"

const [connections = "32", seconds = "10"] = process.argv.slice(2)
const url = process.env.DATABASE_URL

const program = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient
  yield* sql`CREATE TABLE IF NOT EXISTS bench_insert_baseline (id bigserial PRIMARY KEY, payload text NOT NULL, at timestamptz NOT NULL DEFAULT now())`
  const start = yield* Clock.currentTimeMillis
  const deadline = start + Number(seconds) * 1000
  let rows = 0
  const worker = Effect.gen(function*() {
    while ((yield* Clock.currentTimeMillis) < deadline) {
      yield* sql`INSERT INTO bench_insert_baseline (payload) VALUES (${"row"})`
      rows++
    }
  })
  yield* Effect.all(Array.from({ length: Number(connections) }, () => worker), { concurrency: "unbounded" })
  const elapsed = ((yield* Clock.currentTimeMillis) - start) / 1000
  console.log(JSON.stringify({ rows_per_second: rows / elapsed, rows, seconds: elapsed }))
})

const config = AppConfigFrom({
  databaseUrl: url ? Option.some(Redacted.make(url)) : Option.none(),
  dataDir: process.env.PV_DATA_DIR ?? "./.pv-bench-baseline"
})

Effect.runPromise(program.pipe(Effect.provide(DatabaseLive.pipe(Layer.provide(config))), Effect.scoped)).then(
  () => process.exit(0),
  (e) => (console.error(e), process.exit(1))
)
