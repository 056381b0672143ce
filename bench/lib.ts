import pg from "pg"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { generateKeyPairSync, randomBytes, sign, verify } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { resolve as resolvePath } from "node:path"
import { fileURLToPath } from "node:url"
import { mcp2025Body, mcp2026Body, mcp2026Headers } from "./data.js"

export const root = fileURLToPath(new URL("..", import.meta.url))

// A bench piped into `head` must still run its `finally` (stop what it started, drop its database): output to a
// reader that has gone away is dropped instead of crashing the process with EPIPE.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error
})

/**
 * The node flags the service runs with: those of `npm start` (package.json's start script, the one place they
 * are written), or BENCH_NODE_FLAGS when set (e.g. `BENCH_NODE_FLAGS="--max-old-space-size=192"` to compare).
 */
export const serviceNodeFlags = (): Array<string> => {
  const override = process.env.BENCH_NODE_FLAGS
  if (override !== undefined) return override.split(" ").filter((flag) => flag !== "")
  const start: string = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).scripts.start
  return start.split(" ").filter((word) => word.startsWith("--"))
}

export interface Process {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly output: () => string
  readonly stop: () => Promise<void>
}

/** Starts an entry point as its own process and waits for "listening on http://…". */
export const startProcess = (
  entry: string,
  env: Record<string, string> = {},
  args: Array<string> = [],
  nodeArgs: Array<string> = []
): Promise<Process> =>
  new Promise((resolve, reject) => {
    // TypeScript entries go through tsx; compiled JavaScript runs on plain node, as `npm start` does.
    const loader = entry.endsWith(".ts") ? ["--import", "tsx"] : []
    const child = spawn(process.execPath, [...nodeArgs, ...loader, entry, ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const timer = setTimeout(() => (child.kill("SIGKILL"), reject(new Error(`${entry} did not start:\n${output}`))), 120_000)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(output)
      if (match && timer) {
        clearTimeout(timer)
        resolve({
          child,
          baseUrl: match[1]!,
          output: () => output,
          stop: () => new Promise<void>((done) => {
            // Exited already (with a code, or killed by a signal): nothing to wait for.
            if (child.exitCode !== null || child.signalCode !== null) return done()
            child.once("exit", () => done())
            child.kill("SIGTERM")
            setTimeout(() => child.kill("SIGKILL"), 5_000).unref()
          })
        })
      }
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.once("exit", (code) => (clearTimeout(timer), reject(new Error(`${entry} exited (${code}):\n${output}`))))
  })

/** Runs a script to completion and returns its stdout. */
export const runScript = (entry: string, args: Array<string>, env: Record<string, string> = {}): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", entry, ...args], { cwd: root, env: { ...process.env, ...env } })
    let out = ""
    let err = ""
    child.stdout.on("data", (c) => (out += c))
    child.stderr.on("data", (c) => (err += c))
    child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`${entry} failed (${code}): ${err}`))))
  })

/** A process and its descendants (the cluster primary and its workers), Linux only. */
export const processTree = (pid: number): Array<number> => {
  const out = [pid]
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const children = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim()
      for (const child of children === "" ? [] : children.split(" ")) out.push(...processTree(Number(child)))
    }
  } catch {
    // Not Linux, or the process is gone.
  }
  return out
}

/** Peak resident set size of a process so far (VmHWM), in MB; Linux only. */
export const peakRssMb = (pid: number): number | null => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const kb = /VmHWM:\s+(\d+) kB/.exec(status)?.[1]
    return kb === undefined ? null : Number(kb) / 1024
  } catch {
    return null
  }
}

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux nearly everywhere). */
const clockTicks = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100
  } catch {
    return 100
  }
})()

/** User + system CPU seconds in a /proc `stat` file (a process's or a thread's); throws if it cannot be read. */
const statCpuSeconds = (path: string): number => {
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const stat = readFileSync(path, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) / clockTicks
}

/** CPU time (user + system) a process and its descendants have used so far, in seconds; Linux only. */
export const cpuSeconds = (pid: number): number =>
  processTree(pid).reduce((total, p) => {
    try {
      return total + statCpuSeconds(`/proc/${p}/stat`)
    } catch {
      return total
    }
  }, 0)

/**
 * CPU time (user + system) of a process's main thread alone, in seconds, or NaN where /proc cannot tell (not
 * Linux). The rest of `cpuSeconds` is the process's other threads (V8's parallel and concurrent garbage
 * collection and optimising compilation, libuv's pool) and its descendants. The main thread's id is the process id.
 */
export const mainThreadCpuSeconds = (pid: number): number => {
  try {
    return statCpuSeconds(`/proc/${pid}/task/${pid}/stat`)
  } catch {
    return Number.NaN
  }
}

export interface LoadResult {
  readonly requestsPerSecond: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
  readonly errors: number
  readonly total: number
  readonly statusCodes: Record<string, number>
  /** The load generator's own CPU (user + system) over the run, in seconds. */
  readonly generatorCpuSeconds: number
}

export interface LoadOptions {
  readonly url: string
  readonly connections: number
  readonly seconds: number
  /** When set, exactly this many requests (then `seconds` is ignored). */
  readonly amount?: number
  readonly method?: string
  readonly headers?: Record<string, string>
  readonly body?: string
  /** Replace `[<id>]` in the body with a fresh id per request. */
  readonly idReplacement?: boolean
  /** Open loop: at most this many requests a second over all connections (autocannon's overallRate). */
  readonly rate?: number
}

/** autocannon in its own process (so the load generator never shares the server's event loop). */
export const load = (options: LoadOptions): Promise<LoadResult> =>
  new Promise((resolve, reject) => {
    const args = ["--import", "tsx", "bench/loadWorker.ts", JSON.stringify(options)]
    const child = spawn(process.execPath, args, { cwd: root })
    let out = ""
    let err = ""
    child.stdout.on("data", (c) => (out += c))
    child.stderr.on("data", (c) => (err += c))
    child.once("exit", (code) => {
      if (code !== 0) return reject(new Error(`autocannon failed: ${err}`))
      const r = JSON.parse(out)
      resolve({
        requestsPerSecond: r.requests.average,
        p50: r.latency.p50,
        p99: r.latency.p99,
        non2xx: r.non2xx,
        errors: r.errors,
        total: r.requests.total,
        statusCodes: r.statusCodeStats ? Object.fromEntries(Object.entries(r.statusCodeStats).map(([k, v]: [string, any]) => [k, v.count])) : {},
        generatorCpuSeconds: r.generatorCpuSeconds
      })
    })
  })

/** Bounded-concurrency map, for seeding. */
export const mapConcurrent = async <A, B>(items: ReadonlyArray<A>, concurrency: number, f: (a: A, i: number) => Promise<B>): Promise<Array<B>> => {
  const out: Array<B> = new Array(items.length)
  let next = 0
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await f(items[i]!, i)
    }
  }))
  return out
}

/** Per CPU second (this process's user + system time) and per wall-clock second. */
export interface Rate {
  readonly cpu: number
  readonly wall: number
}

/** Runs `work` (which returns how many items it did) until `seconds` of wall time have passed. */
export const measureRate = async (seconds: number, work: () => number | Promise<number>): Promise<Rate> => {
  let done = 0
  const wall0 = process.hrtime.bigint()
  const cpu0 = process.cpuUsage()
  let elapsed = 0
  while (elapsed < seconds) {
    done += await work()
    elapsed = Number(process.hrtime.bigint() - wall0) / 1e9
  }
  const cpu = process.cpuUsage(cpu0)
  return { cpu: done / ((cpu.user + cpu.system) / 1e6), wall: done / elapsed }
}

/**
 * The floor of any event-chain verifier: node:crypto Ed25519 verifications per second of distinct 32-byte
 * messages with a prepared KeyObject, on this process's one thread.
 */
export const ed25519VerifyRate = (seconds: number): Promise<Rate> => {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519")
  const messages = Array.from({ length: 4096 }, () => randomBytes(32))
  const signatures = messages.map((m) => sign(null, m, privateKey))
  return measureRate(seconds, () => {
    for (let i = 0; i < messages.length; i++) {
      if (!verify(null, messages[i]!, publicKey, signatures[i]!)) throw new Error("a prepared signature does not verify")
    }
    return messages.length
  })
}

/** The PostgreSQL server the benches make their scratch databases on (DATABASE_URL's, or the local default). */
export const benchAdminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

/** One statement as the administrator of that server (CREATE / DROP DATABASE). */
export const adminQuery = async (sql: string): Promise<void> => {
  const { default: pg } = await import("pg")
  const admin = new pg.Client({ connectionString: benchAdminUrl })
  await admin.connect()
  try {
    await admin.query(sql)
  } finally {
    await admin.end()
  }
}

/** One webhook key for every process of a bench run (benches sign no v1a delivery, but PostgreSQL mode needs one). */
const benchWebhookSigningKey = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()

/**
 * The service's environment in every bench: compiled and quiet, no demo data, the bench's operator token and
 * keys, and the per-address limits out of the way (the load comes from one address).
 */
export const benchServiceEnv = (keys: { readonly operatorToken: string; readonly signingKey: string; readonly logSigningKey: string }) => ({
  NODE_ENV: "production",
  PORT: "0",
  HOST: "127.0.0.1",
  PV_BANNER: "true",
  PV_DEMO_DATA: "false",
  PV_OPERATOR_TOKEN: keys.operatorToken,
  PV_EVENT_SIGNING_KEY: keys.signingKey,
  PV_LOG_SIGNING_KEY: keys.logSigningKey,
  PV_WEBHOOK_SIGNING_KEY: benchWebhookSigningKey,
  PV_LOG_RATE_LIMIT_PER_MINUTE: "1000000",
  PV_HUMAN_RATE_LIMIT_PER_MINUTE: "1000000",
  PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "1000000",
  PV_AUTH_FAILURE_LIMIT_PER_MINUTE: "1000000",
  REDIS_URL: ""
})

/**
 * The one determination the profiling scripts (through startScenarioService ab.ts, gcTrace.ts, perfProfile.ts, and
 * receiptParts.ts) work against: CURRENT (as of a day ago, valid 100 days), T2, one claim; the body an operator PUTs.
 */
export const profileDeterminationBody = (asOf: number, limitation = "Entity only") => ({
  subject: { subject_id: "s", physical_subject_id: "p", identity_state: "VERIFIED" }, tier: "T2", eligible: true,
  why_this_tier: ["x"], why_not_higher: ["y"], claims: [{ claim_id: "c1", type: "legal_name", value: "X Ltd", scope: "identity" }],
  evidence: [{ evidence_id: "ev1", kind: "registry_extract", digest: "a".repeat(64), collected_at: new Date(asOf).toISOString(), source: "registry" }],
  allowed_claims: ["identity"], limitations: [limitation], prohibited_inferences: ["credential_issued"], lifecycle_state: "NOT_ISSUED",
  as_of: new Date(asOf).toISOString(), valid_until: new Date(asOf + 100 * 86_400_000).toISOString(), engine: { name: "b", version: "1" }
})

/** The reliance request the receipt scenarios send (a principal of their own makes each a new receipt). */
export const profileReceiptRequest = (publicId: string, principal: string) => ({
  tenant_id: "bench", organization: "Bench Org", principal, subject_public_id: publicId,
  purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"]
})

/** PUTs profileDeterminationBody under `publicId`. */
export const putProfileDetermination = async (
  base: string, operator: Record<string, string>, publicId: string, limitation = "Entity only"
): Promise<void> => {
  const put = await fetch(`${base}/api/v1/determinations/${publicId}`, {
    method: "PUT", headers: operator, body: JSON.stringify(profileDeterminationBody(Date.now() - 86_400_000, limitation))
  })
  if (put.status > 201) throw new Error(await put.text())
}

/** Transactions committed so far in database `dbName` (what a load cost the database, as a difference). */
export const databaseCommits = async (dbName: string): Promise<number> => {
  const client = new pg.Client({ connectionString: benchAdminUrl })
  await client.connect()
  const { rows } = await client.query("SELECT xact_commit::int AS n FROM pg_stat_database WHERE datname = $1", [dbName])
  await client.end()
  return rows[0].n as number
}

/** What `measuredLoad` measured: the load's result and the CPU seconds the process used meanwhile. */
export interface MeasuredLoad {
  readonly result: LoadResult
  /** The whole process and its descendants (`cpuSeconds`). */
  readonly used: number
  /** Its main thread alone (`mainThreadCpuSeconds`; NaN where /proc cannot tell). */
  readonly mainUsed: number
}

/**
 * Exactly `requests` requests of `options` at 16 connections (or `connections`) against process `pid`, with
 * the CPU it used meanwhile, main thread first, then the whole (so the whole's window holds the main thread's).
 * Every answer must be a 200 or a 201: anything else, or a connection error, fails with `name` in the message.
 */
export const measuredLoad = async (
  name: string,
  pid: number,
  options: Omit<LoadOptions, "connections" | "seconds">,
  requests: number,
  connections = 16
): Promise<MeasuredLoad> => {
  const before = cpuSeconds(pid)
  const mainBefore = mainThreadCpuSeconds(pid)
  const result = await load({ ...options, connections, seconds: 0, amount: requests })
  const mainUsed = mainThreadCpuSeconds(pid) - mainBefore
  const used = cpuSeconds(pid) - before
  const answered = (result.statusCodes["200"] ?? 0) + (result.statusCodes["201"] ?? 0)
  if (result.total === 0 || answered !== result.total || result.errors > 0) {
    throw new Error(`${name}: ${JSON.stringify(result.statusCodes)}, ${result.errors} errors`)
  }
  return { result, used, mainUsed }
}

/**
 * A key of tenant `bench` with every scope the per-request scenarios need (limits out of the way), and each
 * scenario's request against determination `publicId`: GET /machine, an MCP tools/call of resolve_trust in each
 * era, a receipt replay, a new receipt per request (the load generator puts a fresh id in the principal), a
 * page of 30 events and a GET of one receipt. For startScenarioService (bench/ab.ts, profileCompiled.ts, gcTrace.ts, perfProfile.ts).
 */
export const scenarioRequests = async (base: string, operator: Record<string, string>, publicId: string) => {
  const made = await fetch(`${base}/api/v1/api-keys`, {
    method: "POST", headers: operator, body: JSON.stringify({
      tenant_id: "bench", name: "bench", scopes: ["trust:read", "receipt:read", "receipt:write", "mcp:call"],
      rate_limit_per_minute: 1_000_000, daily_quota: 1_000_000_000
    })
  }).then((r) => r.json()) as { api_key: string }
  const auth = { authorization: `Bearer ${made.api_key}` }
  const json = { ...auth, "content-type": "application/json" }
  const receiptBody = (principal: string) => JSON.stringify(profileReceiptRequest(publicId, principal))
  const mcpHeaders = { ...json, accept: "application/json, text/event-stream" }
  const read = await fetch(`${base}/api/v1/reliance-receipts`, { method: "POST", headers: json, body: receiptBody("read") })
    .then((r) => r.json()) as { receipt_id: string }
  return {
    machine: { url: `${base}/api/v1/trust/${publicId}/machine`, headers: auth },
    mcp: { url: `${base}/api/v1/mcp`, method: "POST", headers: { ...mcpHeaders, "mcp-protocol-version": "2025-06-18" }, body: mcp2025Body(publicId), idReplacement: true },
    mcp2026: { url: `${base}/api/v1/mcp`, method: "POST", headers: { ...mcpHeaders, ...mcp2026Headers }, body: mcp2026Body(publicId), idReplacement: true },
    replay: { url: `${base}/api/v1/reliance-receipts`, method: "POST", headers: json, body: receiptBody("replay") },
    created: { url: `${base}/api/v1/reliance-receipts`, method: "POST", headers: json, body: receiptBody("p-[<id>]"), idReplacement: true },
    events: { url: `${base}/api/v1/events?public_id=${publicId}&after=0&limit=30`, headers: auth },
    // The log's fast path (log/FastReads.ts): the smallest of its answers, so what is left is the path's own cost.
    key: { url: `${base}/log/key` },
    checkpoint: { url: `${base}/log/checkpoint` },
    receipt: { url: `${base}/api/v1/reliance-receipts/${read.receipt_id}`, headers: auth }
  } satisfies Record<string, Omit<LoadOptions, "connections" | "seconds">>
}

/** What `startScenarioService` started. */
export interface ScenarioService {
  readonly service: Process
  /** The scratch database the service runs on. */
  readonly dbName: string
  /** The per-request scenarios' requests (`scenarioRequests`), by name. */
  readonly scenarios: Record<string, Omit<LoadOptions, "connections" | "seconds">>
  /** Stops the service (if still running) and drops its database. */
  readonly close: () => Promise<void>
}

/**
 * The compiled service of checkout `dir` (a path from the working directory; its dist/src/main.js: `npm run build`
 * first, or a copy of dist/ with one change in it) as one process on a fresh PostgreSQL database, with npm
 * start's node flags (or BENCH_NODE_FLAGS) plus `nodeFlags`; determination DET-V1-PROF-0001 loaded (and 60 more revisions of it with `chain`, so a page of
 * 30 events after `after=0` is full, as in bench/cpu.ts) and the per-request scenarios' key and requests made.
 * If anything fails on the way, what was started is stopped and the database dropped. For ab.ts,
 * profileCompiled.ts, gcTrace.ts and perfProfile.ts.
 */
export const startScenarioService = async (
  dir: string,
  nodeFlags: ReadonlyArray<string>,
  options: { readonly databasePrefix: string; readonly chain?: boolean }
): Promise<ScenarioService> => {
  const dbName = `${options.databasePrefix}_${Date.now()}`
  await adminQuery(`CREATE DATABASE ${dbName}`)
  const url = new URL(benchAdminUrl)
  url.pathname = `/${dbName}`
  const token = `p_${randomBytes(24).toString("hex")}`
  const pem = () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
  const drop = () => adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  let service: Process | undefined
  try {
    service = await startProcess(resolvePath(dir, "dist/src/main.js"), {
      DATABASE_URL: url.toString(), NODE_ENV: "production", PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false",
      PV_OPERATOR_TOKEN: token, PV_EVENT_SIGNING_KEY: pem(), PV_LOG_SIGNING_KEY: pem(), PV_WEBHOOK_SIGNING_KEY: pem(), PV_WORKERS: "1", REDIS_URL: "",
      PV_HUMAN_RATE_LIMIT_PER_MINUTE: "1000000", PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "1000000", PV_LOG_RATE_LIMIT_PER_MINUTE: "100000000"
    }, [], [...serviceNodeFlags(), ...nodeFlags])
    const base = service.baseUrl
    const operator = { authorization: `Bearer ${token}`, "content-type": "application/json" }
    const publicId = "DET-V1-PROF-0001"
    await putProfileDetermination(base, operator, publicId)
    if (options.chain === true) for (let i = 1; i <= 60; i++) await putProfileDetermination(base, operator, publicId, `Revision ${i}`)
    const scenarios = await scenarioRequests(base, operator, publicId)
    const started = service
    return {
      service: started,
      dbName,
      scenarios,
      close: async () => {
        await started.stop()
        await drop()
      }
    }
  } catch (error) {
    await service?.stop()
    // The original error is the one to see: a failed drop only says so.
    await drop().catch((dropError) => console.error(`could not drop database ${dbName}:`, dropError))
    throw error
  }
}
