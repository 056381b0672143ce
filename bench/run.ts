// `npm run bench`: starts the service, seeds it, drives load with autocannon from a separate process and
// prints a markdown table of absolute figures and of ratios against baselines measured in the same run.
//   BENCH_NODE_FLAGS="--max-old-space-size=192 …" overrides the service processes' V8 flags (default as npm start).
//   npm run bench [-- --embedded] [--seconds 10] [--determinations 10000] [--growth 100000] [--chain 100000] [--logEntries 1000000] [--workers N]
//   npm run bench -- --witness [--embedded] [--witnessRounds 5] [--witnessRate R]: only the witness rows W1–W4 (bench/witnessRows.ts), in about
//   3½ minutes (5 rounds, since 3 left the median to one noisy round); --witnessRate adds W2 rounds at a fixed R receipts a second (open loop).
//   npm run bench -- --only workers [--workersRounds 3] [--workersConnections 32]: only the workers row (bench/workersRow.ts), new receipts/s
//   with PV_WORKERS=1 against PV_WORKERS=2 on PostgreSQL, in 1–2 minutes.
// Without --embedded it uses PostgreSQL: a fresh database on DATABASE_URL's server (default
// postgres://postgres@127.0.0.1:5432/postgres), dropped afterwards. The HTTP baselines (a) and (b) run in
// as many processes as the service (--workers), so every ratio against them compares equal numbers of
// processes: `--workers 1` is one service process against one baseline process.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { Agent, request as httpRequest } from "node:http"
import { cpus, tmpdir, totalmem } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import pg from "pg"
import { benchPublicId, chainPublicId, mcp2025Body, mcp2026Body, mcp2026Headers } from "./data.js"
import { verifyEventChain } from "../src/domain/EventVerify.js"
import { encodeTileIndex } from "../src/log/Tiles.js"
import { execFileSync } from "node:child_process"
import { drive } from "./faultLoad.js"
import { bulkAppend as bulkAppendTo, treeSize } from "./logData.js"
import { witnessedReceipts, witnessTableRows, witnessThroughput } from "./witnessRows.js"
import { workersScaling, workersTableRow } from "./workersRow.js"
import { adminQuery, benchServiceEnv, ed25519VerifyRate, load, type LoadResult, mapConcurrent, peakRssMb, type Process, processTree, root, runScript, serviceNodeFlags, startProcess } from "./lib.js"

const { values } = parseArgs({
  options: {
    embedded: { type: "boolean", default: false },
    seconds: { type: "string", default: "10" },
    connections: { type: "string", default: "32" },
    determinations: { type: "string", default: "10000" },
    growth: { type: "string", default: "100000" },
    chain: { type: "string", default: "100000" },
    logEntries: { type: "string", default: "1000000" },
    workers: { type: "string" },
    cpu: { type: "boolean", default: false },
    witness: { type: "boolean", default: false },
    witnessRounds: { type: "string", default: "5" },
    // `--only workers`: the workers row alone (PostgreSQL).
    only: { type: "string" },
    workersRounds: { type: "string", default: "3" },
    workersConnections: { type: "string", default: "32" },
    // As many more W2 rounds at this fixed rate (receipts a second, open loop); off by default.
    witnessRate: { type: "string" }
  }
})
// `npm run bench -- --cpu`: only the CPU-per-request table (bench/cpu.ts), in about a minute.
if (values.cpu) {
  execFileSync("npm", ["run", "-s", "build"], { stdio: "inherit" })
  execFileSync(process.execPath, ["--import", "tsx", "bench/cpu.ts", ...process.argv.slice(2).filter((a) => a !== "--cpu")], { stdio: "inherit" })
  process.exit(0)
}
const seconds = Number(values.seconds)
const connections = Number(values.connections)
const embedded = values.embedded!
// Two processes on PostgreSQL (this machine's cores); the embedded database belongs to one process.
const workers = Number(values.workers ?? (embedded ? "1" : "2"))
const operatorToken = `bench_${randomBytes(24).toString("hex")}`
const signingKey = generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString()
const logSigningKey = generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString()
const log = (line: string) => console.error(`[bench] ${line}`)

// ---- database ------------------------------------------------------------------------------------
const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const dbName = `pv_bench_${Date.now()}`
const dataDir = mkdtempSync(join(tmpdir(), "pv-bench-"))
const databaseEnv = async (): Promise<Record<string, string>> => {
  if (embedded) return { PV_DATA_DIR: join(dataDir, "service") }
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${dbName}`)
  await admin.end()
  const url = new URL(adminUrl)
  url.pathname = `/${dbName}`
  return { DATABASE_URL: url.toString() }
}
const dropDatabase = async () => {
  if (embedded) return
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  await admin.end()
}

// ---- service ---------------------------------------------------------------------------------------
let dbEnv: Record<string, string> = {}
const serviceEnv = () => ({
  ...dbEnv,
  ...benchServiceEnv({ operatorToken, signingKey, logSigningKey }),
  PV_WORKERS: String(workers)
})
/** The service as `npm start` runs it (same node flags): compiled JavaScript, built at the start of the run. */
const startService = (env: Record<string, string> = {}) =>
  startProcess("dist/src/main.js", { ...serviceEnv(), ...env }, [], serviceNodeFlags())
const seed = (args: Array<string>) => runScript("bench/seed.ts", args, serviceEnv()).then((out) => JSON.parse(out.trim().split("\n").pop()!))

const createKey = async (service: Process): Promise<string> => {
  const response = await fetch(`${service.baseUrl}/api/v1/api-keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" },
    body: JSON.stringify({
      tenant_id: "bench",
      name: "bench",
      scopes: ["trust:read", "receipt:read", "receipt:write", "mcp:call", "actionability:read", "subscription:write"],
      rate_limit_per_minute: 1_000_000,
      daily_quota: 1_000_000_000
    })
  })
  if (response.status !== 201) throw new Error(`key creation failed: ${response.status} ${await response.text()}`)
  return ((await response.json()) as { api_key: string }).api_key
}

/** Sequential keep-alive requests: a latency probe with microsecond resolution (autocannon reports whole ms). */
const probe = async (url: string, headers: Record<string, string>, n = 2000): Promise<{ p50: number; p99: number }> => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const once = () => new Promise<number>((resolve, reject) => {
    const start = process.hrtime.bigint()
    const req = httpRequest(url, { agent, headers }, (res) => {
      res.resume()
      res.on("end", () => (res.statusCode === 200 ? resolve(Number(process.hrtime.bigint() - start) / 1e6) : reject(new Error(`status ${res.statusCode}`))))
    })
    req.on("error", reject)
    req.end()
  })
  for (let i = 0; i < 200; i++) await once()
  const samples: Array<number> = []
  for (let i = 0; i < n; i++) samples.push(await once())
  agent.destroy()
  samples.sort((a, b) => a - b)
  return { p50: samples[Math.floor(n * 0.5)]!, p99: samples[Math.floor(n * 0.99)]! }
}

// ---- transparency log --------------------------------------------------------------------------------
/** Appends `count` entries to the service's log (bench/logData.ts). */
const bulkAppend = (baseUrl: string, count: number) => bulkAppendTo(dbEnv.DATABASE_URL!, baseUrl, count)

/** Sequential latency of an inclusion proof and of a full hash tile, in a tree of the current size. */
const logProbes = async (baseUrl: string) => {
  const size = await treeSize(baseUrl)
  const index = Math.floor(size / 2)
  return {
    size,
    proof: await probe(`${baseUrl}/api/v1/log/proof/inclusion?index=${index}&tree_size=${size}`, {}),
    tile: await probe(`${baseUrl}/api/v1/log/tile/0/${encodeTileIndex(Math.floor(index / 256))}`, {})
  }
}

const ok = (name: string, r: LoadResult) => {
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${name}: ${r.non2xx} non-2xx, ${r.errors} errors (${JSON.stringify(r.statusCodes)})`)
  log(`${name}: ${r.requestsPerSecond.toFixed(0)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms`)
  return r
}

// ---- witnesses (issue 18) ------------------------------------------------------------------------------
/**
 * W1: one witness process's add-checkpoint rate on this run's database (its own scratch database on
 * PostgreSQL), proofs from a 1M-entry tree; W2/W3: new receipts without and with two local witnesses
 * (quorum 2), rounds of A/B segments (every other round B first) on the current data (the service stopped
 * before), each `seconds / 2` long.
 */
const witnessRows = async (): Promise<{ rows: Array<[string, string, string, string]>; results: Record<string, unknown> }> => {
  const w1Db = `${dbName}_w1`
  let w1Database: { dataDir: string } | { url: string } = { dataDir: join(dataDir, "witness-throughput") }
  if (!embedded) {
    await adminQuery(`CREATE DATABASE ${w1Db}`)
    const url = new URL(adminUrl)
    url.pathname = `/${w1Db}`
    w1Database = { url: url.toString() }
  }
  try {
    log("W1: witness add-checkpoint throughput")
    const w1 = await witnessThroughput({ seconds, logs: 32, entries: 1_000_000, database: w1Database, log })
    log(`W1: ${w1.perSecond.toFixed(0)} answers/s, p99 ${w1.p99.toFixed(1)} ms, ${w1.cpuMicrosPerAnswer.toFixed(0)} µs CPU/answer, ${(100 * w1.coreShare).toFixed(0)} % of a core (load generator ${(100 * w1.loadCoreShare).toFixed(0)} %)`)
    log(`W2/W3: receipts without and with two witnesses, ${values.witnessRounds} rounds (A B, B A, …)`)
    const w2 = await witnessedReceipts({
      seconds: Math.max(4, seconds / 2), connections, rounds: Number(values.witnessRounds), subject: benchPublicId(1), dataDir, logSigningKey,
      startService, createKey, log,
      ...(typeof values.witnessRate === "string" ? { fixedRate: Number(values.witnessRate) } : {})
    })
    return { rows: witnessTableRows(w1, embedded ? "embedded PGlite" : "PostgreSQL", w2), results: { w1, w2 } }
  } finally {
    if (!embedded) await adminQuery(`DROP DATABASE IF EXISTS ${w1Db} WITH (FORCE)`)
  }
}

const header = () =>
  `Run ${new Date().toISOString()} · ${embedded ? "embedded PGlite" : "PostgreSQL"} · ${workers} service process(es), as many per HTTP baseline · node ${process.version} · ${cpus().length} × ${cpus()[0]?.model ?? "cpu"} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · ${connections} connections, ${seconds} s per scenario`

/** The workers row (bench/workersRow.ts): new receipts/s with PV_WORKERS=1 against 2 on this run's database (PostgreSQL only). */
const workersRow = async () => {
  const connections = Number(values.workersConnections)
  const scaling = await workersScaling({
    env: { ...dbEnv, ...benchServiceEnv({ operatorToken, signingKey, logSigningKey }) }, databaseUrl: dbEnv.DATABASE_URL!, databaseName: dbName,
    nodeFlags: serviceNodeFlags(), operatorToken, seconds, connections, rounds: Number(values.workersRounds), log
  })
  return { row: workersTableRow(scaling, connections), results: scaling }
}

/**
 * A selection of rows alone (`--only workers`, `--witness`) on its own scratch database: build, `rows` (which seeds
 * what it needs), the table printed and written to bench/results/ with the file name's `suffix`.
 */
const rowsOnly = async (suffix: string, rows: () => Promise<{ rows: Array<[string, string, string, string]>; results: object }>) => {
  dbEnv = await databaseEnv()
  try {
    log("building (npm run build)")
    execFileSync("npm", ["run", "-s", "build"], { cwd: root, stdio: "inherit" })
    const made = await rows()
    const table = [header(), "", "| scenario | req/s | p50 / p99 ms | ratio (target) |", "|---|---:|---:|---|", ...made.rows.map((r) => `| ${r.join(" | ")} |`)].join("\n")
    console.log(table)
    mkdirSync(join(root, "bench/results"), { recursive: true })
    writeFileSync(join(root, "bench/results", `${new Date().toISOString().replace(/[:.]/g, "-")}-${suffix}.json`), JSON.stringify({ ...made.results, table }, null, 2))
  } finally {
    await dropDatabase()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** `npm run bench -- --only workers`: the workers row alone. */
const workersOnly = async () => {
  if (embedded) throw new Error("--only workers needs PostgreSQL: the embedded database belongs to one process")
  return rowsOnly("workers", async () => {
    const { row, results } = await workersRow()
    return { rows: [row], results }
  })
}

/** `npm run bench -- --witness`: the witness rows alone, on a small seeded data set. */
const witnessOnly = () =>
  rowsOnly("witness", async () => {
    log("seeding 1,000 determinations")
    await seed(["--determinations", "1000"])
    return witnessRows()
  })

// ---- run ---------------------------------------------------------------------------------------------
const main = async () => {
  const results: Record<string, unknown> = {}
  dbEnv = await databaseEnv()
  const auth = (key: string) => ({ authorization: `Bearer ${key}` })
  const machinePath = (i: number) => `/api/v1/trust/${benchPublicId(i)}/machine`
  const shortChain = chainPublicId("SHORT")
  const pageChain = chainPublicId("PAGE")
  const longChain = chainPublicId("LONG")
  try {
    log("building (npm run build)")
    execFileSync("npm", ["run", "-s", "build"], { cwd: root, stdio: "inherit" })
    // Phase A: small data set, for the growth comparison.
    log("seeding 1,000 determinations and a 10-event chain")
    await seed(["--determinations", "1000", "--chain", "SHORT:10"])
    let service = await startService()
    let key = await createKey(service)
    const smallMachine = await probe(service.baseUrl + machinePath(500), auth(key))
    const smallEvents = await probe(`${service.baseUrl}/api/v1/events?public_id=${shortChain}&after=0&limit=10`, auth(key))
    // The transparency log at 10k entries (bulk-appended; PostgreSQL only), for the growth comparison.
    let smallLog: Awaited<ReturnType<typeof logProbes>> | undefined
    if (!embedded) {
      await bulkAppend(service.baseUrl, Math.max(0, 10_000 - (await treeSize(service.baseUrl))))
      smallLog = await logProbes(service.baseUrl)
      log(`log at ${smallLog.size} entries: proof p50 ${smallLog.proof.p50.toFixed(3)} ms, tile p50 ${smallLog.tile.p50.toFixed(3)} ms`)
    }
    await service.stop()

    // Phase B: the default data set; every throughput scenario and the baselines.
    log(`seeding ${values.determinations} determinations`)
    results.seed = await seed(["--determinations", values.determinations!, "--chain", "PAGE:150"])
    service = await startService()
    key = await createKey(service)
    const base = service.baseUrl
    const id = benchPublicId(1)
    const receiptBody = (principal: string) => JSON.stringify({
      tenant_id: "bench", organization: "Bench Org", principal, subject_public_id: id,
      purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"]
    })
    const json = { ...auth(key), "content-type": "application/json" }
    const etag = (await fetch(base + machinePath(1), { headers: auth(key) })).headers.get("etag")!
    const rssAfter: Record<string, number> = {}
    const run = (name: string, options: Omit<Parameters<typeof load>[0], "connections" | "seconds">) =>
      load({ connections, seconds, ...options }).then((r) => {
        rssAfter[name] = Math.max(...processTree(service.child.pid!).map((pid) => peakRssMb(pid) ?? 0))
        log(`  peak RSS so far: ${rssAfter[name]!.toFixed(0)} MB`)
        return ok(name, r)
      })

    // Warm-up (not measured): JIT, lazily loaded modules and first leases, on every worker.
    log("warming up")
    await load({ connections, seconds: Math.max(3, seconds / 2), url: base + machinePath(1), headers: auth(key) })
    const machine = await run("GET /machine warm", { url: base + machinePath(1), headers: auth(key) })
    const notModified = await load({ connections, seconds, url: base + machinePath(1), headers: { ...auth(key), "if-none-match": etag } })
    if (notModified.statusCodes["304"] !== notModified.total) throw new Error(`If-None-Match: ${JSON.stringify(notModified.statusCodes)}`)
    log(`GET /machine 304: ${notModified.requestsPerSecond.toFixed(0)} req/s`)
    const human = await run("GET /human", { url: `${base}/api/v1/trust/${id}/human` })
    const mcp = await run("MCP tools/call resolve_trust", {
      url: `${base}/api/v1/mcp`, method: "POST",
      headers: { ...json, accept: "application/json, text/event-stream" },
      body: mcp2025Body(id), idReplacement: true
    })
    // The same call in MCP 2026-07-28: per-request _meta and the three headers the server checks against it.
    const mcp2026 = await run("MCP 2026-07-28 tools/call resolve_trust", {
      url: `${base}/api/v1/mcp`, method: "POST",
      headers: { ...json, accept: "application/json, text/event-stream", ...mcp2026Headers },
      body: mcp2026Body(id), idReplacement: true
    })
    const events = await run("GET /events page of 100", { url: `${base}/api/v1/events?public_id=${pageChain}&after=0&limit=100`, headers: auth(key) })
    const created = await run("POST receipts (new)", { url: `${base}/api/v1/reliance-receipts`, method: "POST", headers: json, body: receiptBody("p-[<id>]"), idReplacement: true })
    await fetch(`${base}/api/v1/reliance-receipts`, { method: "POST", headers: json, body: receiptBody("replay") })
    const replayed = await run("POST receipts (replayed)", { url: `${base}/api/v1/reliance-receipts`, method: "POST", headers: json, body: receiptBody("replay") })
    const size = await treeSize(base)
    const proofs = await run("GET /log/proof/inclusion", { url: `${base}/api/v1/log/proof/inclusion?index=${Math.floor(size / 2)}&tree_size=${size}` })
    const tiles = await run("GET /log/tile (full hash tile)", { url: `${base}/api/v1/log/tile/0/${encodeTileIndex(Math.floor(size / 512))}` })
    const rssPerProcess = processTree(service.child.pid!).map((pid) => peakRssMb(pid) ?? 0)
    const serverRss = Math.max(...rssPerProcess)
    const serverRssTotal = rssPerProcess.reduce((a, b) => a + b, 0)

    // Overload: four times the connections of every other scenario. Admitted requests are measured
    // apart from the fast 503 `overloaded` refusals (PV_MAX_IN_FLIGHT, default per process).
    log(`overload: GET /machine with ${4 * connections} connections`)
    const overload = await drive({ url: base + machinePath(1), headers: auth(key), connections: 4 * connections, durationMs: seconds * 1000 })
    const overloadRefused = overload.byStatus["503"] ?? 0
    log(`overload: ${JSON.stringify(overload.byStatus)}, admitted ${overload.admittedPerSecond.toFixed(0)}/s, p99 ${overload.admittedP99.toFixed(1)} ms, lost ${overload.lost}`)

    // Drain: SIGTERM in the middle of a receipt-writing load; then every acknowledged receipt must be there.
    log("drain: SIGTERM under receipt load")
    const acknowledged: Array<string> = []
    let exited: number | null | undefined
    service.child.once("exit", (code) => (exited = code))
    const drainLoad = drive({
      url: `${base}/api/v1/reliance-receipts`, method: "POST", headers: json, body: (i) => receiptBody(`drain-${i}`),
      connections, durationMs: 30_000, honourRetryAfter: true,
      onSuccess: (body) => acknowledged.push(JSON.parse(body).receipt_id), stopWhen: () => exited !== undefined
    })
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    const signalledAt = Date.now()
    service.child.kill("SIGTERM")
    const drained = await drainLoad
    while (exited === undefined) await new Promise((resolve) => setTimeout(resolve, 20))
    const drainSeconds = (Date.now() - signalledAt) / 1000
    service = await startService()
    key = await createKey(service)
    const missing = (await mapConcurrent(acknowledged, 16, async (receiptId) =>
      (await fetch(`${service.baseUrl}/api/v1/reliance-receipts/${receiptId}`, { headers: auth(key) })).status === 200 ? 0 : 1
    )).reduce((a: number, b: number) => a + b, 0)
    log(`drain: exit ${exited} after ${drainSeconds.toFixed(2)} s; ${JSON.stringify(drained.byStatus)}; lost ${drained.lost}; ${acknowledged.length} acknowledged, ${missing} missing after restart`)
    await service.stop()

    // New receipts with the transparency log switched off, then on again, back to back on the same data.
    const receiptsWith = async (logging: boolean) => {
      service = await startService({ PV_LOG_ENABLED: String(logging) })
      key = await createKey(service)
      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
      const url = `${service.baseUrl}/api/v1/reliance-receipts`
      await load({ connections, seconds: Math.max(2, seconds / 3), url, method: "POST", headers, body: receiptBody(`warm-${logging}-[<id>]`), idReplacement: true })
      const result = ok(`POST receipts (new), logging ${logging ? "on" : "off"}`, await load({
        connections, seconds, url, method: "POST", headers, body: receiptBody(`log-${logging}-[<id>]`), idReplacement: true
      }))
      await service.stop()
      return result
    }
    const unlogged = await receiptsWith(false)
    const logged = await receiptsWith(true)
    const witnessing = await witnessRows()
    // The workers row: PV_WORKERS=1 against 2 (PostgreSQL only), its services started on the same data.
    const scaling = embedded ? undefined : await workersRow()

    log("baselines")
    const baselineArgs = ["--workers", String(workers)]
    const nodeHttp = await startProcess("bench/baselines/nodeHttp.ts", {}, baselineArgs)
    const baselineA = ok("baseline (a) node:http", await load({ url: nodeHttp.baseUrl + "/", connections, seconds }))
    await nodeHttp.stop()
    const httpApi = await startProcess("bench/baselines/httpApi.ts", {}, baselineArgs)
    const baselineB = ok("baseline (b) HttpApi", await load({ url: httpApi.baseUrl + "/fixed", connections, seconds }))
    await httpApi.stop()
    const insertEnv = embedded ? { PV_DATA_DIR: join(dataDir, "baseline-c") } : { DATABASE_URL: dbEnv.DATABASE_URL!, PV_EVENT_SIGNING_KEY: signingKey, PV_LOG_SIGNING_KEY: logSigningKey }
    const baselineC = JSON.parse((await runScript("bench/baselines/insertLoop.ts", [String(connections), String(seconds)], insertEnv)).trim())
    log(`baseline (c) INSERT loop: ${baselineC.rows_per_second.toFixed(0)} rows/s`)

    // Phase C: growth to the large data set and a long chain.
    log(`seeding up to ${values.growth} determinations and a ${values.chain}-event chain`)
    results.growthSeed = await seed(["--determinations", values.growth!, "--chain", `LONG:${values.chain}`])
    service = await startService()
    key = await createKey(service)
    const largeMachine = await probe(service.baseUrl + machinePath(500), auth(key))
    // The log grown to a million entries: the integration rate, then the same probes as at 10k.
    let integration: Awaited<ReturnType<typeof bulkAppend>> | undefined
    let largeLog: Awaited<ReturnType<typeof logProbes>> | undefined
    if (!embedded) {
      const toAdd = Math.max(0, Number(values.logEntries) - (await treeSize(service.baseUrl)))
      log(`bulk-appending ${toAdd} log entries`)
      integration = await bulkAppend(service.baseUrl, toAdd)
      log(`integrated ${integration.entries} entries in ${integration.seconds.toFixed(1)} s (${integration.perSecond.toFixed(0)}/s)`)
      largeLog = await logProbes(service.baseUrl)
      log(`log at ${largeLog.size} entries: proof p50 ${largeLog.proof.p50.toFixed(3)} ms, tile p50 ${largeLog.tile.p50.toFixed(3)} ms`)
    }
    const head = Number(values.chain)
    const largeEvents = await probe(`${service.baseUrl}/api/v1/events?public_id=${longChain}&after=${head - 10}&limit=10`, auth(key))
    // verify-events: save the whole chain, then time `pv verify-events --file` (one process, one core).
    const feed: Array<unknown> = []
    let after = 0
    for (;;) {
      const page = (await (await fetch(`${service.baseUrl}/api/v1/events?public_id=${longChain}&after=${after}&limit=1000`, { headers: auth(key) })).json()) as { events: Array<unknown>; next_after: number | null }
      feed.push(...page.events)
      if (page.next_after === null) break
      after = page.next_after
    }
    const jwks: unknown = await (await fetch(`${service.baseUrl}/api/v1/events/keys`)).json()
    const feedFile = join(dataDir, "chain.json")
    writeFileSync(feedFile, JSON.stringify({ events: feed, jwks }))
    const largeRss = Math.max(...processTree(service.child.pid!).map((pid) => peakRssMb(pid) ?? 0))
    await service.stop()
    // The verifier `pv verify-events` runs, timed alone on this (single-threaded) process: one core.
    const verifyStart = process.hrtime.bigint()
    const verifyCpu = process.cpuUsage()
    const verdict = verifyEventChain(feed, jwks)
    const verifySeconds = Number(process.hrtime.bigint() - verifyStart) / 1e9
    const verifyCpuUsed = process.cpuUsage(verifyCpu)
    const verifyCpuSeconds = (verifyCpuUsed.user + verifyCpuUsed.system) / 1e6
    if (!verdict.ok) throw new Error(`the seeded chain does not verify: ${JSON.stringify(verdict)}`)
    const verifyRate = feed.length / verifySeconds
    // Its floor in the same run: one node:crypto Ed25519 verify per event (bench/verifyEvents.ts has the detail).
    const ed25519 = await ed25519VerifyRate(3)
    // And the whole command, start-up and file parsing included.
    const cliStart = process.hrtime.bigint()
    await runScript("src/cli/main.ts", ["verify-events", "--file", feedFile])
    const cliSeconds = Number(process.hrtime.bigint() - cliStart) / 1e9

    const rows: Array<[string, string, string, string]> = [
      ["baseline (a) node:http fixed 1 KB JSON", fmt(baselineA.requestsPerSecond), `${baselineA.p50} / ${baselineA.p99}`, ""],
      ["baseline (b) HttpApi fixed 1 KB JSON", fmt(baselineB.requestsPerSecond), `${baselineB.p50} / ${baselineB.p99}`, ""],
      ["baseline (c) durable INSERT loop (rows/s)", fmt(baselineC.rows_per_second), "", ""],
      ["GET /machine warm", fmt(machine.requestsPerSecond), `${machine.p50} / ${machine.p99}`, `${ratio(machine.requestsPerSecond / baselineB.requestsPerSecond, 0.8, "× (b)")}; ${ratio(machine.requestsPerSecond / baselineA.requestsPerSecond, 0.15, "× (a)")}; p99 ${machine.p99} ms ${machine.p99 <= 25 ? "≤" : ">"} 25`],
      ["GET /machine, If-None-Match → 304", fmt(notModified.requestsPerSecond), `${notModified.p50} / ${notModified.p99}`, `${(notModified.requestsPerSecond / baselineB.requestsPerSecond).toFixed(2)} × (b)`],
      ["GET /human", fmt(human.requestsPerSecond), `${human.p50} / ${human.p99}`, `${(human.requestsPerSecond / baselineB.requestsPerSecond).toFixed(2)} × (b)`],
      ["MCP tools/call resolve_trust", fmt(mcp.requestsPerSecond), `${mcp.p50} / ${mcp.p99}`, ratio(mcp.requestsPerSecond / machine.requestsPerSecond, 0.7, "× GET /machine")],
      ["MCP 2026-07-28 tools/call resolve_trust", fmt(mcp2026.requestsPerSecond), `${mcp2026.p50} / ${mcp2026.p99}`, `${ratio(mcp2026.requestsPerSecond / machine.requestsPerSecond, 0.7, "× GET /machine")}; ${(mcp2026.requestsPerSecond / mcp.requestsPerSecond).toFixed(2)} × 2025 MCP`],
      ["POST reliance-receipts (new)", fmt(created.requestsPerSecond), `${created.p50} / ${created.p99}`, ratio(created.requestsPerSecond / baselineC.rows_per_second, 0.5, "× (c)")],
      ["POST reliance-receipts (replayed)", fmt(replayed.requestsPerSecond), `${replayed.p50} / ${replayed.p99}`, ratio(replayed.requestsPerSecond / machine.requestsPerSecond, 0.7, "× GET /machine")],
      ["GET /events page of 100", fmt(events.requestsPerSecond), `${events.p50} / ${events.p99}`, `${(events.requestsPerSecond / baselineB.requestsPerSecond).toFixed(2)} × (b)`],
      [`overload: GET /machine, ${4 * connections} connections (4×), admitted`, fmt(overload.admittedPerSecond), `${overload.admittedP50.toFixed(1)} / ${overload.admittedP99.toFixed(1)}`, atMost(overload.admittedP99 / machine.p99, 4, `× unloaded p99 (≤ 4×); ${pct(overloadRefused, overload.sent)} answered 503 overloaded (p99 ${overload.refusalP99.toFixed(1)} ms); lost ${overload.lost}`)],
      ["drain: SIGTERM under receipt load, requests lost", String(drained.lost + missing), "", `${drained.lost + missing === 0 ? "0 ✅" : "❌"} (${drained.lost} unanswered, ${missing} of ${acknowledged.length} acknowledged receipts missing after restart; exit ${exited} in ${drainSeconds.toFixed(2)} s; ${JSON.stringify(drained.byStatus)})`],
      ["POST reliance-receipts (new), logging off / on, back to back", `${fmt(unlogged.requestsPerSecond)} / ${fmt(logged.requestsPerSecond)}`, `${logged.p50} / ${logged.p99}`, ratio(logged.requestsPerSecond / unlogged.requestsPerSecond, 0.9, "× logging off")],
      ...(scaling === undefined ? [] : [scaling.row]),
      ["GET /log/proof/inclusion", fmt(proofs.requestsPerSecond), `${proofs.p50} / ${proofs.p99}`, atMost(proofs.p99, 10, " ms p99 (≤ 10)")],
      ["GET /log/tile (full hash tile)", fmt(tiles.requestsPerSecond), `${tiles.p50} / ${tiles.p99}`, atMost(tiles.p99, 10, " ms p99 (≤ 10)")],
      ...(integration === undefined || smallLog === undefined || largeLog === undefined ? [] : [
        [`log integration: ${fmt(integration.entries)} bulk-appended entries (entries/s)`, fmt(integration.perSecond), "", ratio(integration.perSecond / 10_000, 1, `× 10,000 entries/s; all covered by a checkpoint ${integration.seconds.toFixed(1)} s after the append began`)],
        [`growth: inclusion proof p50, ${fmt(smallLog.size)} → ${fmt(largeLog.size)} entries`, `${smallLog.proof.p50.toFixed(3)} → ${largeLog.proof.p50.toFixed(3)} ms`, "", atMost(largeLog.proof.p50 / smallLog.proof.p50, 1.2, "× (≤ 1.2×)")],
        [`growth: hash tile p50, ${fmt(smallLog.size)} → ${fmt(largeLog.size)} entries`, `${smallLog.tile.p50.toFixed(3)} → ${largeLog.tile.p50.toFixed(3)} ms`, "", atMost(largeLog.tile.p50 / smallLog.tile.p50, 1.2, "× (≤ 1.2×)")]
      ] as Array<[string, string, string, string]>),
      ...witnessing.rows,
      [`verify-events: ${feed.length}-event chain, verifier on one core (events/s)`, fmt(verifyRate), "", ratio(verifyRate / 10_000, 1, `× 10,000 events/s; whole \`pv verify-events --file\` ${fmt(feed.length / cliSeconds)} events/s`)],
      ["verify-events ÷ node:crypto Ed25519 verify/s, same process (per CPU second)", fmt(feed.length / verifyCpuSeconds), "", ratio(feed.length / verifyCpuSeconds / ed25519.cpu, 0.9, `× ${fmt(ed25519.cpu)} verifies/s`)],
      [`server peak RSS under load, largest of ${rssPerProcess.length} process(es) (MB)`, serverRss.toFixed(0), "", atMost(serverRss, 180, ` MB (≤ 180); all processes ${serverRssTotal.toFixed(0)} MB; ${largeRss.toFixed(0)} MB in the ${values.growth} run`)],
      [`growth: GET /machine p50, 1k → ${values.growth} determinations`, `${smallMachine.p50.toFixed(3)} → ${largeMachine.p50.toFixed(3)} ms`, "", atMost(largeMachine.p50 / smallMachine.p50, 1.2, "× (≤ 1.2×)")],
      [`growth: events head page p50, 10 → ${values.chain} events`, `${smallEvents.p50.toFixed(3)} → ${largeEvents.p50.toFixed(3)} ms`, "", atMost(largeEvents.p50 / smallEvents.p50, 1.2, "× (≤ 1.2×)")]
    ]
    const table = [
      header(),
      "",
      "| scenario | req/s | p50 / p99 ms | ratio (target) |",
      "|---|---:|---:|---|",
      ...rows.map((r) => `| ${r.join(" | ")} |`)
    ].join("\n")
    console.log(table)
    Object.assign(results, {
      at: new Date().toISOString(), embedded, seconds, connections, baselineA, baselineB, baselineC, machine, notModified, human, mcp, mcp2026,
      events, created, replayed, proofs, tiles, receiptsLogging: { off: unlogged, on: logged }, workersScaling: scaling?.results, witnessing: witnessing.results, log: { smallLog, largeLog, integration }, overload, drain: { ...drained, acknowledged: acknowledged.length, missing, exitCode: exited, seconds: drainSeconds }, verify: { events: feed.length, seconds: verifySeconds, perSecond: verifyRate, cpuSeconds: verifyCpuSeconds, ed25519VerifyPerCpuSecond: ed25519.cpu, cliSeconds },
      workers, baselineWorkers: workers, rssAfter, rssMb: serverRss, rssTotalMb: serverRssTotal, largeRssMb: largeRss, growth: { smallMachine, largeMachine, smallEvents, largeEvents }, table
    })
    mkdirSync(join(root, "bench/results"), { recursive: true })
    writeFileSync(join(root, "bench/results", `${new Date().toISOString().replace(/[:.]/g, "-")}.json`), JSON.stringify(results, null, 2))
  } finally {
    await dropDatabase()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

const pct = (part: number, whole: number) => `${whole === 0 ? 0 : ((100 * part) / whole).toFixed(1)} %`
const fmt = (n: number) => Math.round(n).toLocaleString("en-US")
const ratio = (value: number, target: number, label: string) => `${value.toFixed(2)} ${label} (≥ ${target}) ${value >= target ? "✅" : "❌"}`
const atMost = (value: number, limit: number, label: string) => `${value.toFixed(2)}${label} ${value <= limit ? "✅" : "❌"}`

;(values.only === "workers" ? workersOnly() : values.witness ? witnessOnly() : main()).then(() => process.exit(0), (e) => (console.error(e), process.exit(1)))
