// `node --import tsx bench/witness.ts [--seconds 10] [--logs 32] [--entries 1000000] [--postgres]`:
// add-checkpoint answers per second of one `pv witness serve` process (embedded database by default, so
// the witness and its database share one core; --postgres uses a fresh database on DATABASE_URL's server),
// with consistency proofs from a tree of --entries leaves. Each of --logs logs submits its checkpoints one
// after the other (as a log does), so the witness serves --logs submissions at a time.
import { mkdtempSync, rmSync } from "node:fs"
import { Agent, request as httpRequest } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import pg from "pg"
import { privateKeyFromSeed } from "../src/events/Signer.js"
import { signCheckpoint } from "../src/log/Checkpoint.js"
import { consistencyPath, leafHash, rootOf, subtreeHashesOf } from "../src/log/Merkle.js"
import { noteSignerFromPrivateKey, verifierKeyOfSigner } from "../src/log/Note.js"
import { cpuSeconds, startProcess } from "./lib.js"
import { summarise } from "./profileSummary.js"
import { readdirSync } from "node:fs"

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "10" },
    logs: { type: "string", default: "32" },
    entries: { type: "string", default: "1000000" },
    postgres: { type: "boolean", default: false },
    profile: { type: "boolean", default: false },
    tsx: { type: "boolean", default: false }
  }
})
const seconds = Number(values.seconds)
const logCount = Number(values.logs)
const entries = Number(values.entries)
const log = (line: string) => console.error(`[bench:witness] ${line}`)

log(`building a tree of ${entries} leaves`)
const leaves = Array.from({ length: entries }, (_, i) => leafHash(Buffer.from(`entry ${i}`)))
const tree = subtreeHashesOf(leaves)

/** Enough submissions per log for 4,000 answers/s over the run; sizes step by 7 up to the full tree. */
const steps = Math.ceil((4_000 * seconds) / logCount)
const logs = Array.from({ length: logCount }, (_, i) => {
  const signer = noteSignerFromPrivateKey(`bench.example/log-${i}`, privateKeyFromSeed(Buffer.alloc(32, i + 1)))
  return { signer, vkey: verifierKeyOfSigner(signer.name, privateKeyFromSeed(Buffer.alloc(32, i + 1))) }
})
log(`signing ${steps + 1} checkpoints and proofs for each of ${logCount} logs`)
const first = entries - 7 * steps
const bodies = logs.map(({ signer }) => {
  const sizes = Array.from({ length: steps + 1 }, (_, j) => first + 7 * j)
  const note = (size: number) => signCheckpoint({ origin: signer.name, size, root: rootOf(size, tree), extensions: [] }, signer)
  return sizes.map((size, j) => {
    const old = j === 0 ? 0 : sizes[j - 1]!
    const proof = j === 0 ? [] : consistencyPath(old, size, tree)
    return `old ${old}\n${proof.map((h) => `${Buffer.from(h).toString("base64")}\n`).join("")}\n${note(size)}`
  })
})

const dataDir = mkdtempSync(join(tmpdir(), "pv-bench-witness-"))
const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const dbName = `pv_bench_witness_${Date.now()}`
let databaseEnv: Record<string, string> = { PV_DATA_DIR: dataDir }
if (values.postgres) {
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${dbName}`)
  await admin.end()
  const url = new URL(adminUrl)
  url.pathname = `/${dbName}`
  databaseEnv = { DATABASE_URL: url.toString(), PV_WITNESS_SIGNING_KEY: privateKeyFromSeed(Buffer.alloc(32, 200)).export({ format: "pem", type: "pkcs8" }).toString() }
}

const profileDir = join(dataDir, "profile")
const witness = await startProcess(values.tsx ? "src/cli/main.ts" : "dist/src/cli/main.js", {
  ...databaseEnv,
  PORT: "0",
  HOST: "127.0.0.1",
  PV_WITNESS_NAME: "bench.example/witness",
  PV_WITNESS_LOGS: logs.map((l) => l.vkey).join(","),
  PV_MAX_IN_FLIGHT: String(Math.max(64, logCount * 2)),
  NODE_ENV: "production"
}, ["witness", "serve"], ["--max-old-space-size=192", ...(values.profile ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [])])
log(`witness at ${witness.baseUrl}`)

const agent = new Agent({ keepAlive: true, maxSockets: logCount })
const { hostname, port } = new URL(witness.baseUrl)
const post = (body: string) =>
  new Promise<number>((resolve, reject) => {
    const req = httpRequest({ agent, hostname, port, method: "POST", path: "/add-checkpoint", headers: { "content-length": Buffer.byteLength(body) } }, (res) => {
      res.resume()
      res.once("end", () => resolve(res.statusCode ?? 0))
    })
    req.once("error", reject)
    req.end(body)
  })

const latencies: Array<number> = []
const statuses = new Map<number, number>()
const cpu0 = cpuSeconds(witness.child.pid!)
const started = performance.now()
const deadline = started + seconds * 1000
await Promise.all(bodies.map(async (list) => {
  for (const body of list) {
    if (performance.now() > deadline) return
    const t = performance.now()
    const status = await post(body)
    latencies.push(performance.now() - t)
    statuses.set(status, (statuses.get(status) ?? 0) + 1)
  }
}))
const elapsed = (performance.now() - started) / 1000
const cpuUsed = cpuSeconds(witness.child.pid!) - cpu0
latencies.sort((a, b) => a - b)
const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(2)
await witness.stop()
agent.destroy()
if (values.profile) console.error(summarise(readdirSync(profileDir).filter((f) => f.endsWith(".cpuprofile")).map((f) => join(profileDir, f))[0]!))
rmSync(dataDir, { recursive: true, force: true })
if (values.postgres) {
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  await admin.end()
}
console.log(`| witness add-checkpoint (${values.postgres ? "PostgreSQL" : "embedded"}, ${logCount} logs, ${entries} entries) | ` +
  `${(latencies.length / elapsed).toFixed(0)} answers/s | p50 ${at(0.5)} ms | p99 ${at(0.99)} ms | witness CPU ${(1e6 * cpuUsed / latencies.length).toFixed(0)} µs/answer (${(100 * cpuUsed / elapsed).toFixed(0)} % of a core) | statuses ${JSON.stringify(Object.fromEntries(statuses))} |`)
