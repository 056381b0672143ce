// `node --import tsx bench/witness.ts [--seconds 10] [--logs 32] [--entries 1000000] [--postgres] [--profile] [--entry dist/src/cli/main.js] [--runs 1]`:
// row W1 of `npm run bench` alone (bench/witnessRows.ts): add-checkpoint answers per second of one compiled
// `pv witness serve` process (embedded database by default, so the witness and its database share one core;
// --postgres uses a fresh database on DATABASE_URL's server), with consistency proofs from a tree of --entries
// leaves, and the witness's CPU per answer. --profile prints its CPU profile's summary; --entry runs another
// build (e.g. a copy of dist/ made before a change); --runs repeats the measurement. Build first (npm run build).
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { adminQuery, benchAdminUrl } from "./lib.js"
import { profileOf, witnessThroughput } from "./witnessRows.js"

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "10" },
    logs: { type: "string", default: "32" },
    entries: { type: "string", default: "1000000" },
    postgres: { type: "boolean", default: false },
    profile: { type: "boolean", default: false },
    entry: { type: "string", default: "dist/src/cli/main.js" },
    runs: { type: "string", default: "1" }
  }
})
const log = (line: string) => console.error(`[bench:witness] ${line}`)

for (let run = 0; run < Number(values.runs); run++) {
  const dataDir = mkdtempSync(join(tmpdir(), "pv-bench-witness-"))
  const dbName = `pv_bench_witness_${Date.now()}`
  try {
    let database: { dataDir: string } | { url: string } = { dataDir }
    if (values.postgres) {
      await adminQuery(`CREATE DATABASE ${dbName}`)
      const url = new URL(benchAdminUrl)
      url.pathname = `/${dbName}`
      database = { url: url.toString() }
    }
    const profileDir = values.profile ? join(dataDir, "profile") : undefined
    const r = await witnessThroughput({
      seconds: Number(values.seconds), logs: Number(values.logs), entries: Number(values.entries), database, log, entry: values.entry!,
      ...(profileDir === undefined ? {} : { profileDir })
    })
    if (profileDir !== undefined) console.error(profileOf(profileDir))
    console.log(`| witness add-checkpoint (${values.postgres ? "PostgreSQL" : "embedded"}, ${values.logs} logs, ${values.entries} entries, ${values.entry}) | ` +
      `${r.perSecond.toFixed(0)} answers/s | p50 ${r.p50.toFixed(2)} ms | p99 ${r.p99.toFixed(2)} ms | witness CPU ${r.cpuMicrosPerAnswer.toFixed(0)} µs/answer ` +
      `(${(100 * r.coreShare).toFixed(0)} % of a core; Ed25519 verify + sign ${r.cryptoFloorMicros.toFixed(0)} µs) | statuses ${JSON.stringify(r.statuses)} |`)
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
    if (values.postgres) await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  }
}
