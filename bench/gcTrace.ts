// `node --import tsx bench/gcTrace.ts [dir] [machine|mcp|mcp2026|replay|created|events] [requests] [rounds]`: what the
// garbage collector and the compiler do per request. The compiled service of checkout `dir` (default `.`,
// `npm run build` first; a copy of dist/ with one change in it works too, which is how docs/PERFORMANCE.md's
// eighth pass attributed a new receipt's CPU) runs one process on a fresh PostgreSQL database with npm start's
// node flags (this checkout's package.json, or BENCH_NODE_FLAGS) plus `--trace-gc-nvp --trace-opt`; after a
// warm-up, each of `rounds` (default 2) rounds of `requests` (default 10,000) at 16 connections prints: CPU µs per
// request from /proc, split into the main thread and the others (V8's collection and compilation threads, libuv's
// pool); young-generation collections, bytes promoted to the old generation and bytes that survived a young
// collection without being promoted, per request; full collections; TurboFan and Maglev compilations; latency
// p50/p99. V8 writes its trace through a buffered stdout (about 4 KB, two or three collections' lines), so a
// round's slice of it may hold a few lines of the one before or miss its own last few: the per-request figures
// are good to a few per cent, the small counts (full collections, compilations) to a few.
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { resolve } from "node:path"
import {
  adminQuery,
  benchAdminUrl,
  cpuSeconds,
  load,
  type LoadOptions,
  mainThreadCpuSeconds,
  type Process,
  putProfileDetermination,
  scenarioRequests,
  serviceNodeFlags,
  startProcess
} from "./lib.js"

const [dir = ".", scenario = "created", requestsArg = "10000", roundsArg = "2"] = process.argv.slice(2)
const requests = Number(requestsArg)
const rounds = Number(roundsArg)
if (!(Number.isInteger(requests) && requests > 0 && Number.isInteger(rounds) && rounds > 0)) {
  throw new Error("usage: bench/gcTrace.ts [dir] [machine|mcp|mcp2026|replay|created|events] [requests > 0] [rounds > 0]")
}
const pem = () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const publicId = "DET-V1-PROF-0001"
const dbName = `pv_gctrace_${Date.now()}`

/** Sums of the young collections' `promoted=` and `new_space_survived=` fields in V8's `--trace-gc-nvp` lines. */
const youngCollections = (trace: string) => {
  let count = 0, promoted = 0, survived = 0
  for (const match of trace.matchAll(/gc=s .*?promoted=(\d+) .*?new_space_survived=(\d+)/g)) {
    count++
    promoted += Number(match[1])
    survived += Number(match[2])
  }
  return { count, promoted, survived }
}

await adminQuery(`CREATE DATABASE ${dbName}`)
const url = new URL(benchAdminUrl)
url.pathname = `/${dbName}`
const token = `p_${randomBytes(24).toString("hex")}`
let service: Process | undefined
try {
  service = await startProcess(resolve(dir, "dist/src/main.js"), {
    DATABASE_URL: url.toString(), NODE_ENV: "production", PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false",
    PV_OPERATOR_TOKEN: token, PV_EVENT_SIGNING_KEY: pem(), PV_LOG_SIGNING_KEY: pem(), PV_WORKERS: "1", REDIS_URL: "",
    PV_HUMAN_RATE_LIMIT_PER_MINUTE: "1000000", PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "1000000"
  }, [], [...serviceNodeFlags(), "--trace-gc-nvp", "--trace-opt"])
  const base = service.baseUrl
  const operator = { authorization: `Bearer ${token}`, "content-type": "application/json" }
  await putProfileDetermination(base, operator, publicId)
  // For `events`: a chain of 61 events (as bench/cpu.ts), so `after=0&limit=30` is a full page.
  if (scenario === "events") for (let i = 1; i <= 60; i++) await putProfileDetermination(base, operator, publicId, `Revision ${i}`)
  const scenarios: Record<string, Omit<LoadOptions, "connections" | "seconds">> = await scenarioRequests(base, operator, publicId)
  const options = scenarios[scenario]
  if (options === undefined) throw new Error(`unknown scenario ${scenario}: one of ${Object.keys(scenarios).join(", ")}`)
  await load({ ...options, connections: 16, seconds: 0, amount: Math.max(1_000, Math.floor(requests / 3)) })
  const pid = service.child.pid!
  for (let round = 1; round <= rounds; round++) {
    // Cut at line ends: a line the buffer split belongs to the slice it ends in.
    const traceFrom = service.output().lastIndexOf("\n") + 1
    const before = cpuSeconds(pid)
    const mainBefore = mainThreadCpuSeconds(pid)
    const result = await load({ ...options, connections: 16, seconds: 0, amount: requests })
    const mainUsed = mainThreadCpuSeconds(pid) - mainBefore
    const used = cpuSeconds(pid) - before
    const output = service.output()
    const trace = output.slice(traceFrom, output.lastIndexOf("\n") + 1)
    const answered = (result.statusCodes["200"] ?? 0) + (result.statusCodes["201"] ?? 0)
    if (result.total === 0 || answered !== result.total || result.errors > 0) {
      throw new Error(`${scenario} round ${round}: ${JSON.stringify(result.statusCodes)}, ${result.errors} errors`)
    }
    const young = youngCollections(trace)
    const per = (x: number) => (x / result.total).toFixed(0)
    console.log(
      `${scenario} round ${round}: ${result.total} requests, ${JSON.stringify(result.statusCodes)}; CPU ${(used * 1e6 / result.total).toFixed(1)} µs/request ` +
        `(main thread ${(mainUsed * 1e6 / result.total).toFixed(1)}, other threads ${((used - mainUsed) * 1e6 / result.total).toFixed(1)}); ` +
        `${young.count} young collections, promoted ${per(young.promoted)} B/request, survived one without promotion ${per(young.survived)} B/request; ` +
        `${(trace.match(/gc=mc/g) ?? []).length} full collections; compilations: ${(trace.match(/completed compiling[^\n]*target TURBOFAN/g) ?? []).length} TurboFan, ` +
        `${(trace.match(/completed compiling[^\n]*target MAGLEV/g) ?? []).length} Maglev; ` +
        `p50 ${result.p50} ms, p99 ${result.p99} ms`
    )
  }
} finally {
  await service?.stop()
  await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
}
