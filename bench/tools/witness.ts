// `node --import tsx bench/tools/witness.ts [--seconds 10] [--logs 32] [--entries 1000000] [--postgres] [--profile] [--entry dist/src/cli/main.js] [--runs 1]`:
// row W1 of `npm run bench` alone (bench/witnessRows.ts): add-checkpoint answers per second of one compiled
// `pv witness serve` process (embedded database by default, so the witness and its database share one core;
// --postgres uses a fresh database on DATABASE_URL's server), with consistency proofs from a tree of --entries
// leaves, and the witness's CPU per answer. --profile prints its CPU profile's summary; --entry runs another
// build (e.g. a copy of dist/ made before a change); --runs repeats the measurement. Build first (npm run build).
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { adminQuery, benchAdminUrl } from "../lib.js"
import { stepsOf } from "../profileSummary.js"
import { profileOf, witnessThroughput } from "../witnessRows.js"

/** The steps of an answer, as --profile splits the witness's busy time (the first that matches a frame of a sample's stack). */
const witnessSteps: ReadonlyArray<readonly [string, RegExp]> = [
  ["start-up (module loading, layers)", /compileSourceTextModule|compileForInternalLoader|launchWitness|cjs-module-lexer|getPackageScopeConfig|internalModuleStat|Layer\.js/],
  ["garbage collection", /^\(garbage collector\)/],
  ["the log's signature (Ed25519 verify)", /^verify src\/log\/Note/],
  ["the note: split, parse the checkpoint", /^checkLogSignature /],
  ["cosign (Ed25519 sign, the line)", /^cosign src\/log\/Cosignature/],
  ["rules and consistency proof", /^decide src\/witness/],
  ["parse the body", /^parseAddCheckpoint /],
  ["store: group commit statements (Effect SQL, driver, socket)", /^settle |^startWriters |PgPool|sql-pg|effect\/dist\/sql|readHeld/],
  ["HTTP response write", /^end node:_http_outgoing|^writeHead node:_http_server|^resOnFinish|^emitCloseNT|^requestDone|^onFinish node:_http_outgoing/],
  ["front door (admission, request id, record)", /src\/http\/FrontDoor/],
  ["body read, UTF-8, submit", /readBoundedMessage|^onEnd src\/http\/Problems|src\/witness\/Server|^submit src\/witness|^decideAndStore/],
  ["HTTP parser, sockets (node)", /node:_http|node:net|node:internal\/stream|^\(program\)/],
  ["Effect runtime (other)", /effect\/dist/]
]

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "10" },
    logs: { type: "string", default: "32" },
    entries: { type: "string", default: "1000000" },
    postgres: { type: "boolean", default: false },
    profile: { type: "boolean", default: false },
    entry: { type: "string", default: "dist/src/cli/main.js" },
    runs: { type: "string", default: "1" },
    keep: { type: "string" }
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
    if (profileDir !== undefined) {
      console.error(profileOf(profileDir))
      const file = readdirSync(profileDir).find((f) => f.endsWith(".cpuprofile"))
      if (file !== undefined) {
        // A sample's time is wall time (a process waiting for a busy machine's core stretches it), so the busy time
        // after start-up is split in shares, and the shares applied to the CPU per answer measured from /proc.
        const steps = stepsOf(join(profileDir, file), witnessSteps, 1).slice(1)
        const busy = steps.reduce((t, [, x]) => t + x, 0)
        console.error(`the ${r.cpuMicrosPerAnswer.toFixed(0)} µs of CPU per answer, by step (shares of the profile's busy time after start-up):`)
        for (const [step, t] of steps) console.error(`  ${(r.cpuMicrosPerAnswer * t / busy).toFixed(0).padStart(5)} µs ${(100 * t / busy).toFixed(1).padStart(5)} %  ${step}`)
        if (values.keep !== undefined) copyFileSync(join(profileDir, file), values.keep)
      }
    }
    console.log(`| witness add-checkpoint (${values.postgres ? "PostgreSQL" : "embedded"}, ${values.logs} logs, ${values.entries} entries, ${values.entry}) | ` +
      `${r.perSecond.toFixed(0)} answers/s | p50 ${r.p50.toFixed(2)} ms | p99 ${r.p99.toFixed(2)} ms | witness CPU ${r.cpuMicrosPerAnswer.toFixed(0)} µs/answer ` +
      `(${(100 * r.coreShare).toFixed(0)} % of a core; load generator ${(100 * r.loadCoreShare).toFixed(0)} %${r.databaseCoreShare === undefined ? "" : `, database ${(100 * r.databaseCoreShare).toFixed(0)} %`}; Ed25519 verify + sign ${r.cryptoFloorMicros.toFixed(0)} µs) | statuses ${JSON.stringify(r.statuses)} |`)
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
    if (values.postgres) await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  }
}
