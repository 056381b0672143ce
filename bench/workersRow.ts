// The workers row of `npm run bench` (bench/run.ts; `npm run bench -- --only workers` runs only it, in 1–2 min):
// new receipts per second at saturation with PV_WORKERS=1 and PV_WORKERS=2 on PostgreSQL, the same load generator
// (autocannon in its own process, `connections` connections) against both, in rounds of two back-to-back arms
// (1 then 2, then 2 then 1, …) on the same database, each arm a freshly started service warmed up first. The
// verdict is the median of the rounds' ratios of receipts/s (target ≥ 1.6 ×). On a 2-core machine the server
// shares its cores with PostgreSQL and the load generator, so each arm also reports, from /proc over the measured
// window: the serving processes' CPU per receipt (the primary and its workers), the database backends' CPU per
// receipt (this database's connections; not the server's shared WAL writer and checkpointer), the load
// generator's own CPU (as a share of a core), and the machine's idle share (all cores, /proc/stat: near 0 means
// the ratio is bounded by the cores, not by the service).
import { readFileSync } from "node:fs"
import { cpus } from "node:os"
import { cpuSeconds, databaseCommits, load, mainThreadCpuSeconds, type LoadResult, type Process, putProfileDetermination, startProcess } from "./lib.js"

export interface WorkersArm {
  readonly workers: number
  readonly result: LoadResult
  readonly seconds: number
  /** New receipts (201s) per second of the window. */
  readonly perSecond: number
  /** Requests refused with 503 `overloaded` (the adaptive admission limit) in the window. */
  readonly refused: number
  /** µs of the serving processes' CPU (the cluster primary and its workers) per receipt. */
  readonly serverMicros: number
  /** Their CPU over the wall time (1 = one core). */
  readonly serverCores: number
  /** `serverMicros` less what the processes spend idle (`idleServerCores` over the window): the receipts' own work. */
  readonly serverNetMicros: number
  /** µs of this database's PostgreSQL backends' CPU per receipt. */
  readonly databaseMicros: number
  readonly databaseCores: number
  /** With workers: the cluster primary's main thread over the wall time (handing connections over), else 0. */
  readonly primaryCores: number
  /** The load generator's CPU over the wall time (autocannon's process). */
  readonly loadCores: number
  /** µs of the load generator's CPU per receipt. */
  readonly loadMicros: number
  /** The machine's idle share over the window (all cores; iowait counted as idle). */
  readonly idle: number
  /** Transactions committed in the database per receipt (pg_stat_database: group commits, and everything else). */
  readonly commitsPerReceipt: number
  /** The serving processes' and the backends' CPU while idle, right before (cores): what runs whatever the load. */
  readonly idleServerCores: number
  readonly idleDatabaseCores: number
  /** The load average when the arm began (1 minute). */
  readonly loadAverage: number
}

export interface WorkersScaling {
  readonly arms: ReadonlyArray<WorkersArm>
  /** Per round: receipts/s with 2 workers ÷ with 1. */
  readonly ratios: ReadonlyArray<number>
  /** Per round: server CPU per receipt with 2 workers ÷ with 1. */
  readonly cpuRatios: ReadonlyArray<number>
  /** Per round: the same net of each arm's idle CPU. */
  readonly netCpuRatios: ReadonlyArray<number>
}

/** Seconds each arm's service is watched idle before its load. */
const IdleSeconds = 3

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The machine's busy and total CPU ticks so far, over all cores (/proc/stat's first line). */
const machineTicks = (): { idle: number; total: number } => {
  const fields = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!.trim().split(/\s+/).slice(1).map(Number)
  // user nice system idle iowait irq softirq steal (guest time is already inside user).
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0)
  return { idle: fields[3]! + fields[4]!, total }
}

/** CPU seconds so far of every PostgreSQL backend connected to database `url` (a local server), by pid. */
const databaseCpu = async (url: string): Promise<Map<number, number>> => {
  const { default: pg } = await import("pg")
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const rows = (await client.query("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")).rows as Array<{ pid: number }>
    return new Map(rows.map((row) => [row.pid, cpuSeconds(row.pid)]))
  } finally {
    await client.end()
  }
}

/** The CPU the backends used between two readings; a backend that started meanwhile counts whole. */
const databaseCpuUsed = (before: Map<number, number>, after: Map<number, number>) =>
  [...after].reduce((total, [pid, seconds]) => total + seconds - (before.get(pid) ?? 0), 0)

export const workersScaling = async (options: {
  /** The service's environment (database, keys, bench limits); PV_WORKERS is set per arm. */
  readonly env: Record<string, string>
  readonly databaseUrl: string
  /** That database's name (pg_stat_database). */
  readonly databaseName: string
  readonly nodeFlags: Array<string>
  readonly operatorToken: string
  readonly seconds: number
  readonly connections: number
  readonly rounds: number
  readonly log: (line: string) => void
}): Promise<WorkersScaling> => {
  const { env, seconds, connections, log } = options
  const operator = { authorization: `Bearer ${options.operatorToken}`, "content-type": "application/json" }
  const publicId = "DET-V1-BENCH-WORKERS-0001"
  let headers: Record<string, string> | undefined
  const arm = async (workers: number, tag: string): Promise<WorkersArm> => {
    const service: Process = await startProcess("dist/src/main.js", { ...env, PV_WORKERS: String(workers) }, [], options.nodeFlags)
    try {
      const url = `${service.baseUrl}/api/v1/reliance-receipts`
      if (headers === undefined) {
        await putProfileDetermination(service.baseUrl, operator, publicId)
        const made = await fetch(`${service.baseUrl}/api/v1/api-keys`, {
          method: "POST", headers: operator, body: JSON.stringify({
            tenant_id: "bench", name: "bench-workers", scopes: ["receipt:write"], rate_limit_per_minute: 1_000_000, daily_quota: 1_000_000_000
          })
        })
        if (made.status !== 201) throw new Error(`key creation failed: ${made.status} ${await made.text()}`)
        headers = { authorization: `Bearer ${((await made.json()) as { api_key: string }).api_key}`, "content-type": "application/json" }
      }
      const body = (principal: string) => JSON.stringify({
        tenant_id: "bench", organization: "Bench Org", principal, subject_public_id: publicId,
        purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"]
      })
      // Warm-up (not measured): JIT, leases and pools on every worker (the connections are handed round in turn).
      await load({ connections, seconds: Math.max(3, seconds / 2), url, method: "POST", headers, body: body(`warm-${tag}-[<id>]`), idReplacement: true })
      const pid = service.child.pid!
      // Idle (the integrator, leases, probes, metrics of every process): IdleSeconds without requests.
      const idle0 = { server: cpuSeconds(pid), database: await databaseCpu(options.databaseUrl), wall: performance.now() }
      await new Promise((resolve) => setTimeout(resolve, IdleSeconds * 1000))
      const database0 = await databaseCpu(options.databaseUrl)
      const server0 = cpuSeconds(pid)
      const primary0 = mainThreadCpuSeconds(pid)
      const idleWall = (performance.now() - idle0.wall) / 1000
      const idleServerCores = (server0 - idle0.server) / idleWall
      const idleDatabaseCores = databaseCpuUsed(idle0.database, database0) / idleWall
      const loadAverage = Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0])
      const commits0 = await databaseCommits(options.databaseName)
      const machine0 = machineTicks()
      const wall0 = performance.now()
      const result = await load({ connections, seconds, url, method: "POST", headers, body: body(`w-${tag}-[<id>]`), idReplacement: true })
      const wall = (performance.now() - wall0) / 1000
      const server = cpuSeconds(pid) - server0
      const primary = mainThreadCpuSeconds(pid) - primary0
      const machine1 = machineTicks()
      const database = databaseCpuUsed(database0, await databaseCpu(options.databaseUrl))
      const commits = (await databaseCommits(options.databaseName)) - commits0
      // Receipts are the 201s; a 503 `overloaded` (the adaptive admission limit) is a refusal, counted apart.
      const created = result.statusCodes["201"] ?? 0
      const refused = result.statusCodes["503"] ?? 0
      if (created + refused !== result.total || result.errors > 0) throw new Error(`workers ${workers}: ${JSON.stringify(result.statusCodes)}, ${result.errors} errors`)
      const done: WorkersArm = {
        workers, result, seconds: wall, loadAverage, perSecond: created / wall, refused,
        serverMicros: (server * 1e6) / created, serverCores: server / wall,
        serverNetMicros: ((server - idleServerCores * wall) * 1e6) / created,
        databaseMicros: (database * 1e6) / created, databaseCores: database / wall,
        loadCores: result.generatorCpuSeconds / wall, loadMicros: (result.generatorCpuSeconds * 1e6) / Math.max(1, created), primaryCores: workers > 1 ? primary / wall : 0, commitsPerReceipt: commits / Math.max(1, created), idleServerCores, idleDatabaseCores,
        idle: (machine1.idle - machine0.idle) / Math.max(1, machine1.total - machine0.total)
      }
      log(`workers ${workers}: ${done.perSecond.toFixed(0)} receipts/s (${refused} refused), p50 ${result.p50} ms, p99 ${result.p99} ms; server ${done.serverMicros.toFixed(0)} µs/receipt, ${done.serverNetMicros.toFixed(0)} net of idle (${done.serverCores.toFixed(2)} cores${workers > 1 ? `, the primary ${done.primaryCores.toFixed(3)}` : ""}), database ${done.databaseMicros.toFixed(0)} µs/receipt (${done.databaseCores.toFixed(2)} cores), load generator ${done.loadCores.toFixed(2)} cores, ${done.commitsPerReceipt.toFixed(3)} commits/receipt, idle: server ${idleServerCores.toFixed(3)} cores, database ${idleDatabaseCores.toFixed(3)} cores; machine ${(100 * done.idle).toFixed(0)} % idle, load average ${loadAverage.toFixed(1)}`)
      return done
    } finally {
      await service.stop()
    }
  }
  const arms: Array<WorkersArm> = []
  const ratios: Array<number> = []
  const cpuRatios: Array<number> = []
  const netCpuRatios: Array<number> = []
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 === 0 ? [1, 2] : [2, 1]
    const [a, b] = [await arm(order[0]!, `${round}-${order[0]}`), await arm(order[1]!, `${round}-${order[1]}`)]
    const [one, two] = a.workers === 1 ? [a, b] : [b, a]
    arms.push(one, two)
    ratios.push(two.perSecond / one.perSecond)
    cpuRatios.push(two.serverMicros / one.serverMicros)
    netCpuRatios.push(two.serverNetMicros / one.serverNetMicros)
    log(`workers round ${round + 1}: 2 ÷ 1 workers ${ratios.at(-1)!.toFixed(2)} × receipts/s, ${cpuRatios.at(-1)!.toFixed(2)} × server CPU per receipt (${netCpuRatios.at(-1)!.toFixed(2)} × net of idle)`)
  }
  return { arms, ratios, cpuRatios, netCpuRatios }
}

/**
 * The table's row: receipts/s of each arm (medians), the median ratio with its range, the CPU per receipt of both;
 * and what the machine allows whatever the number of workers: its cores over all the CPU a receipt takes with one
 * worker (the server's net of idle, the database's, the load generator's).
 */
export const workersTableRow = (scaling: WorkersScaling, connections: number): [string, string, string, string] => {
  const of = (workers: number) => scaling.arms.filter((a) => a.workers === workers)
  const med = (workers: number, f: (a: WorkersArm) => number) => median(of(workers).map(f))
  const fmt = (n: number) => Math.round(n).toLocaleString("en-US")
  const ratio = median(scaling.ratios)
  const perReceipt = med(1, (a) => a.serverNetMicros) + med(1, (a) => a.databaseMicros) + med(1, (a) => a.loadMicros)
  const range = (values: ReadonlyArray<number>) => `${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)}`
  return [
    `POST reliance-receipts (new), PV_WORKERS=1 / 2, ${connections} connections (receipts/s, medians of ${scaling.ratios.length} rounds)`,
    `${fmt(med(1, (a) => a.perSecond))} / ${fmt(med(2, (a) => a.perSecond))}`,
    `${med(2, (a) => a.result.p50)} / ${med(2, (a) => a.result.p99)}`,
    `${ratio.toFixed(2)} × one worker (${range(scaling.ratios)}) (≥ 1.6) ${ratio >= 1.6 ? "✅" : "❌"}; server CPU per receipt ${fmt(med(1, (a) => a.serverMicros))} / ${fmt(med(2, (a) => a.serverMicros))} µs (${median(scaling.cpuRatios).toFixed(2)} ×), net of idle ${fmt(med(1, (a) => a.serverNetMicros))} / ${fmt(med(2, (a) => a.serverNetMicros))} µs (${median(scaling.netCpuRatios).toFixed(2)} ×); idle server ${med(1, (a) => a.idleServerCores).toFixed(3)} / ${med(2, (a) => a.idleServerCores).toFixed(3)} cores; database ${fmt(med(1, (a) => a.databaseMicros))} / ${fmt(med(2, (a) => a.databaseMicros))} µs; cores used: server ${med(1, (a) => a.serverCores).toFixed(2)} / ${med(2, (a) => a.serverCores).toFixed(2)}, database ${med(1, (a) => a.databaseCores).toFixed(2)} / ${med(2, (a) => a.databaseCores).toFixed(2)}, load generator ${med(1, (a) => a.loadCores).toFixed(2)} / ${med(2, (a) => a.loadCores).toFixed(2)}; commits per receipt ${med(1, (a) => a.commitsPerReceipt).toFixed(2)} / ${med(2, (a) => a.commitsPerReceipt).toFixed(2)}; machine idle ${(100 * med(1, (a) => a.idle)).toFixed(0)} / ${(100 * med(2, (a) => a.idle)).toFixed(0)} %; a receipt takes ${fmt(perReceipt)} µs of CPU in all with one worker (load generator ${fmt(med(1, (a) => a.loadMicros))}), so ${cpus().length} cores allow at most ${fmt((cpus().length * 1e6) / perReceipt)} receipts/s; refused (503) ${med(1, (a) => a.refused)} / ${med(2, (a) => a.refused)}`
  ]
}
