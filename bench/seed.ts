// Seeds a benchmark database. Determinations go through the service's own ingestion path
// (Determinations.ingest: a version, evidence rows and a signed event per change), batched in outer
// transactions so commits do not dominate, several batches at once on PostgreSQL. Long event chains are
// sealed with the project's own recipe (sealEvent) and key and inserted 1,000 rows per statement: the
// reads a benchmark measures depend on the table's shape, and 100,000 serial updates would take minutes.
//   tsx bench/seed.ts --determinations N [--chain NAME:LENGTH]...
// Idempotent: existing determinations are left as they are; chains are extended to LENGTH events.
import { parseArgs } from "node:util"
import { PgClient } from "@effect/sql-pg"
import { Array as Arr, Clock, Effect, Layer, Schema } from "effect"
import { ServicesLive } from "../src/app/Server.js"
import { sealEvent } from "../src/domain/EventChain.js"
import { PublicId } from "../src/domain/PublicId.js"
import type { TrustEvent } from "../src/domain/TrustEvent.js"
import { EventsRepo } from "../src/events/Repo.js"
import { Signer } from "../src/events/Signer.js"
import { AppConfig } from "../src/platform/Config.js"
import { DatabaseMode } from "../src/platform/Database.js"
import { Determinations } from "../src/trust/Determinations.js"
import { benchBody, benchPublicId, chainPublicId } from "./data.js"

const { values } = parseArgs({
  options: { determinations: { type: "string", default: "0" }, chain: { type: "string", multiple: true, default: [] } }
})
const target = Number(values.determinations)
const batch = 250
/** The generated ids are valid public ids; decoded as the service's edge would. */
const publicId = Schema.decodeSync(PublicId)

const program = Effect.gen(function*() {
  const determinations = yield* Determinations
  const sql = yield* PgClient.PgClient
  const mode = yield* DatabaseMode
  const now = yield* Clock.currentTimeMillis
  // ::int: count(*) is int8, which the driver decodes to a bigint.
  const existing = yield* sql`SELECT count(*)::int AS n FROM determinations WHERE public_id LIKE 'DET-V1-BENCH-%'`.pipe(
    Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Schema.Struct({ n: Schema.Int })))),
    Effect.orDie
  )
  const from = existing[0]?.n ?? 0
  const started = Date.now()
  const batches: Array<[number, number]> = []
  for (let i = from; i < target; i += batch) batches.push([i, Math.min(target, i + batch)])
  yield* Effect.forEach(batches, ([start, end]) =>
    sql.withTransaction(Effect.forEach(
      Array.from({ length: end - start }, (_, k) => start + k),
      (i) => determinations.ingest(publicId(benchPublicId(i)), benchBody(i, now)),
      { discard: true }
    )), { concurrency: mode.kind === "postgres" ? 8 : 1, discard: true })

  const signer = yield* Signer
  const events = yield* EventsRepo
  for (const spec of values.chain ?? []) {
    const [name, lengthText] = spec.split(":")
    const chainId = publicId(chainPublicId(name!))
    const length = Number(lengthText)
    const stored = yield* determinations.ingest(chainId, benchBody(1, now))
    yield* events.recordKey(signer.jwk, new Date(now))
    const [head] = yield* sql`
      SELECT head_sequence AS sequence, head_hash AS hash FROM determinations WHERE public_id = ${chainId}`.pipe(
      Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Schema.Struct({ sequence: Schema.Int, hash: Schema.NullOr(Schema.String) })))),
      Effect.orDie
    )
    let sequence = head?.sequence ?? 0
    let previous = head?.hash ?? null
    while (sequence < length) {
      const rows: Array<TrustEvent> = []
      for (let k = 0; k < 1000 && sequence < length; k++) {
        sequence++
        const event = sealEvent({
          sequence,
          event_id: `evt_bench_${name}_${String(sequence).padStart(7, "0")}`,
          public_id: chainId,
          type: "determination.updated",
          occurred_at: new Date(now - (length - sequence) * 1000).toISOString(),
          payload: {
            determination_id: stored.determination_id,
            version: stored.version,
            determination_digest: stored.determination_digest,
            changed_fields: ["claims"],
            freshness_state: "CURRENT"
          },
          previousEventHash: previous
        }, signer)
        previous = event.eventHash
        rows.push(event)
      }
      const inserted = rows.map((e) => ({
        public_id: e.public_id,
        sequence: e.sequence,
        event_id: e.event_id,
        type: e.type,
        occurred_at: new Date(e.occurred_at),
        payload: JSON.stringify(e.payload),
        previous_event_hash: e.previousEventHash,
        event_hash: e.eventHash,
        kid: e.signature.kid,
        sig: e.signature.sig
      }))
      if (!Arr.isArrayNonEmpty(inserted)) break
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO events ${sql.insert(inserted)}`
        yield* sql`UPDATE determinations SET head_sequence = ${sequence}, head_hash = ${previous} WHERE public_id = ${chainId}`
      }))
    }
  }
  console.log(JSON.stringify({ seeded_determinations: Math.max(0, target - from), seconds: (Date.now() - started) / 1000 }))
})

const SeedLive = Layer.mergeAll(ServicesLive, EventsRepo.layer, Signer.layer).pipe(
  Layer.provide(ServicesLive),
  Layer.provide(AppConfig.layer)
)

Effect.runPromise(program.pipe(Effect.provide(SeedLive), Effect.scoped)).then(
  () => process.exit(0),
  (e) => (console.error(e), process.exit(1))
)
