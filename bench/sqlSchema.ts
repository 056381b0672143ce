import { Effect, Option, Schema } from "effect"
import * as Rows from "../src/platform/Rows.js"
import { VersionRow } from "../src/trust/Repo.js"

/**
 * Per-call cost of reading rows through `SqlSchema` (platform/Rows.ts `findOneOption`, `findAll`) against
 * the precompiled decoder alone (`Rows.batchRows`: what the hand-written decodeRows did), for the row the
 * trust read path decodes on a cache miss (trust/Repo.ts VersionRow, ten columns). The statement is a stub returning one row, so only the work
 * around the database is timed. Best of 15 runs of 50,000 calls each; `npm run -s bench:sql-schema`.
 * Results: docs/EFFECT4-PORT.md §5.
 */
const row = {
  public_id: "DET-V1-BENCH-A",
  determination_id: "d",
  version: 1,
  body: { a: 1 },
  determination_digest: "x",
  evidence_digest: "y",
  recorded_at: new Date(),
  head_sequence: 3,
  head_hash: "h",
  freshness_due_at: null
}
const statement = (_id: string): Effect.Effect<ReadonlyArray<unknown>> => Effect.succeed([row])

const versionRows = Rows.batchRows(VersionRow)
const variants: Record<string, (id: string) => Effect.Effect<unknown>> = {
  "precompiled row decoder alone (Rows.batchRows, the decodeRows it replaced)": (id) => Effect.map(versionRows(statement(id)), (rows) => Option.fromNullishOr(rows[0])),
  "SqlSchema findOneOption, request String": Rows.findOneOption({ Request: Schema.String, Result: VersionRow, execute: statement }),
  "SqlSchema findAll, request String": ((find) => (id: string) => Effect.map(find(id), (rows) => Option.fromNullishOr(rows[0])))(
    Rows.findAll({ Request: Schema.String, Result: VersionRow, execute: statement })
  ),
  "SqlSchema findOneOption, request Struct(2)": ((find) => (id: string) => find({ tenantId: "t", id }))(
    Rows.findOneOption({ Request: Schema.Struct({ tenantId: Schema.String, id: Schema.String }), Result: VersionRow, execute: (r) => statement(r.id) })
  ),
  "SqlSchema findOneOption, request Struct(6)": ((find) => (id: string) => find({ a: "t", b: id, c: "x", d: "y", e: "z", f: "w" }))(
    Rows.findOneOption({
      Request: Schema.Struct({ a: Schema.String, b: Schema.String, c: Schema.String, d: Schema.String, e: Schema.String, f: Schema.String }),
      Result: VersionRow,
      execute: (r) => statement(r.b)
    })
  )
}

const calls = 50_000
const timeOf = (f: (id: string) => Effect.Effect<unknown>) => {
  const start = process.hrtime.bigint()
  Effect.runSync(Effect.forEach(Array.from({ length: calls }), () => f("a"), { discard: true }))
  return Number(process.hrtime.bigint() - start) / calls
}
const best: Record<string, number> = {}
for (const f of Object.values(variants)) timeOf(f)
for (let run = 0; run < 15; run++) {
  for (const [name, f] of Object.entries(variants)) best[name] = Math.min(best[name] ?? Infinity, timeOf(f))
}
for (const [name, ns] of Object.entries(best)) console.log(`${name}: ${(ns / 1000).toFixed(2)} µs per call`)
