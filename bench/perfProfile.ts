// `node --import tsx bench/perfProfile.ts [dir] [machine|mcp|mcp2026|replay|created|events|bprime] [requests]`: where a
// request's CPU goes, as the operating system sees it: Linux `perf` samples every thread of the service process
// on the CPU clock (`perf record -e cpu-clock`), so the JavaScript, V8's garbage collection and compilation threads,
// the kernel's share of the sockets and native code (OpenSSL, llhttp, libuv) are all in one picture. V8's own
// profiler (bench/profileCompiled.ts) samples the main thread only and by wall clock: a thread that the kernel
// put aside during a `write` still shows as busy in it, and the collector's and compiler's threads not at all.
//
// The compiled service of checkout `dir` (default `.`, `npm run build` first; a copy of dist/ with one change in
// it works too) runs one process on a fresh PostgreSQL database with npm start's node flags (this checkout's
// package.json, or BENCH_NODE_FLAGS) plus `--perf-basic-prof` (so perf can name JIT-compiled functions); after a
// warm-up of `requests` (default 20,000) requests at 16 connections, perf samples the process at 4,999 Hz while
// `requests` more are answered, and this prints CPU µs per request from /proc over the same window, the samples
// split by thread (main and the others), by kind (what the symbols' names say they are: JavaScript by package,
// V8's builtins, garbage collection, the optimising compiler, crypto, JSON, the kernel, libc, other native code)
// and the 25 symbols with most samples. `bprime` profiles bench/baselines/bearerApi.ts, the (b') of
// `npm run bench:cpu`, answering the service's trust document under the same key, with node's default flags as
// there (BENCH_BASELINE_NODE_FLAGS gives it flags). Needs `perf` (Debian's linux-perf) and the right to attach to
// the process (root, or kernel.perf_event_paranoid ≤ 1); the sampling adds a few per cent of CPU.
import { spawn, spawnSync } from "node:child_process"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
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

const [dir = ".", scenario = "machine", requestsArg = "20000"] = process.argv.slice(2)
const requests = Number(requestsArg)
if (!(Number.isInteger(requests) && requests > 0)) {
  throw new Error("usage: bench/perfProfile.ts [dir] [machine|mcp|mcp2026|replay|created|events|bprime] [requests > 0]")
}
if (spawnSync("perf", ["--version"]).status !== 0) throw new Error("perf is not installed (Debian: apt-get install linux-perf)")

const pem = () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const publicId = "DET-V1-PROF-0001"
const dbName = `pv_perf_${Date.now()}`
const scratch = mkdtempSync(join(tmpdir(), "pv-perf-"))
const samplesFile = join(scratch, "perf.data")

/** One line of `perf report --sort dso,sym`: share of samples, the object it ran in, the symbol, kernel or not. */
interface Line {
  readonly share: number
  readonly dso: string
  readonly symbol: string
  readonly kernel: boolean
}

const report = (sort: string): Array<string> => {
  const run = spawnSync("perf", ["report", "-i", samplesFile, "--no-children", "--sort", sort, "-g", "none", "--stdio", "--percent-limit", "0"], {
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024
  })
  if (run.status !== 0) throw new Error(`perf report failed: ${run.stderr}`)
  return run.stdout.split("\n").filter((line) => line.trim() !== "" && !line.startsWith("#"))
}

const symbolLines = (): Array<Line> =>
  report("dso,sym").flatMap((text) => {
    // "   3.90%  node   [.] v8::internal::…" or "0.5%  [JIT] tid 123  [.] JS:*f file:///…" or "… [kernel.kallsyms]  [k] …"
    const match = /^\s*([\d.]+)%\s+(.*?)\s+\[([.k])\]\s+(.*)$/.exec(text)
    return match === null ? [] : [{ share: Number(match[1]), dso: match[2]!, kernel: match[3] === "k", symbol: match[4]!.trim() }]
  })

/** What a sampled symbol is, by its name and object. A name-based reading: good to a per cent or two. */
const kindOf = ({ dso, kernel, symbol }: Line): string => {
  if (kernel) return "kernel (system calls, TCP, scheduling)"
  if (symbol.startsWith("JS:")) {
    if (/\/dist\/src\/|\/bench\//.test(symbol)) return "JavaScript: the service (or the baseline)"
    if (/node_modules\/(effect|@effect)\//.test(symbol)) return "JavaScript: effect, @effect/*"
    if (/ node:/.test(symbol)) return "JavaScript: Node.js's own"
    return "JavaScript: other"
  }
  if (symbol.startsWith("RegExp:")) return "regular expressions (V8's compiled code)"
  if (
    symbol === "Builtins_CompileLazy" ||
    /v8::internal::(Parser|PreParser|Scanner|Compiler::|AstValueFactory|DeclarationScope|Scope::|interpreter::Bytecode)/.test(symbol)
  ) {
    return "V8 lazy compilation (parser, bytecode generator)"
  }
  if (/compiler::|turboshaft|maglev|Maglev|Turbofan|OptimizedCompilationJob|PipelineCompilationJob/.test(symbol)) return "V8 optimising compiler"
  if (/Scaveng|SemiSpace|NewSpace/.test(symbol)) return "V8 garbage collection: young generation (scavenges)"
  if (/MarkCompact|Marking|Sweep|Evacuat|Compactor|MarkingVisitor|BodyDescriptor|HeapObject::SizeFromMap|Worklist/.test(symbol)) {
    return "V8 garbage collection: full collections (marking, sweeping, compaction)"
  }
  if (/Heap::|FreeList|PagedSpace|LargeObjectSpace|GCTracer|MemoryAllocator|ObjectVisitor|RememberedSet|SlotSet|TypedSlot/.test(symbol)) return "V8 garbage collection: other (allocation, remembered sets)"
  if (/^(fe_|ge_|x25519|X25519|ED25519|ed25519|sha256|SHA256|sha512|SHA512|cmov|sc_|EVP_|OPENSSL_|ossl_|bn_|BN_|CRYPTO_|table_select|x25519_)/.test(symbol)) return "crypto (OpenSSL)"
  if (/Json(Stringifier|Parser)|JSON/.test(symbol)) return "V8 JSON"
  if (symbol.startsWith("Builtins_")) return "V8 builtins (interpreter, inline caches, calls)"
  if (/libc\.so|libstdc\+\+|libgcc|libm\.so/.test(dso)) return "libc (memory, strings)"
  return "other native (V8 runtime, Node.js, libuv, llhttp)"
}

await adminQuery(`CREATE DATABASE ${dbName}`)
const url = new URL(benchAdminUrl)
url.pathname = `/${dbName}`
const token = `p_${randomBytes(24).toString("hex")}`
const started: Array<Process> = []
try {
  const service = await startProcess(resolve(dir, "dist/src/main.js"), {
    DATABASE_URL: url.toString(), NODE_ENV: "production", PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false",
    PV_OPERATOR_TOKEN: token, PV_EVENT_SIGNING_KEY: pem(), PV_LOG_SIGNING_KEY: pem(), PV_WORKERS: "1", REDIS_URL: "",
    PV_HUMAN_RATE_LIMIT_PER_MINUTE: "1000000", PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "1000000"
  }, [], [...serviceNodeFlags(), "--perf-basic-prof"])
  started.push(service)
  const base = service.baseUrl
  const operator = { authorization: `Bearer ${token}`, "content-type": "application/json" }
  await putProfileDetermination(base, operator, publicId)
  // For `events`: a chain of 61 events (as bench/cpu.ts), so `after=0&limit=30` is a full page.
  if (scenario === "events") for (let i = 1; i <= 60; i++) await putProfileDetermination(base, operator, publicId, `Revision ${i}`)
  const scenarios: Record<string, Omit<LoadOptions, "connections" | "seconds">> = await scenarioRequests(base, operator, publicId)
  let target = service
  let options = scenarios[scenario]
  if (scenario === "bprime") {
    // (b') as bench/cpu.ts starts it: the service's trust document, the scenarios' key.
    const machine = scenarios.machine!
    const documentFile = join(scratch, "machine.json")
    const headers = machine.headers ?? {}
    writeFileSync(documentFile, await fetch(machine.url, { headers }).then((r) => r.text()))
    const key = (headers.authorization ?? "").slice("Bearer ".length)
    const baselineFlags = (process.env.BENCH_BASELINE_NODE_FLAGS ?? "").split(" ").filter((flag) => flag !== "")
    target = await startProcess("bench/baselines/bearerApi.ts", { BENCH_DOCUMENT_FILE: documentFile, BENCH_KEY: key }, [], [...baselineFlags, "--perf-basic-prof"])
    started.push(target)
    options = { ...machine, url: machine.url.replace(base, target.baseUrl) }
  }
  if (options === undefined) throw new Error(`unknown scenario ${scenario}: one of ${[...Object.keys(scenarios), "bprime"].join(", ")}`)
  await load({ ...options, connections: 16, seconds: 0, amount: requests })

  const pid = target.child.pid!
  const perf = spawn("perf", ["record", "-q", "-F", "4999", "-e", "cpu-clock", "-p", String(pid), "-o", samplesFile], { stdio: ["ignore", "ignore", "pipe"] })
  let perfErrors = ""
  perf.stderr.on("data", (chunk) => (perfErrors += chunk))
  const perfExited = new Promise<number | null>((done) => perf.once("exit", done))
  await new Promise((settle) => setTimeout(settle, 300))
  if (perf.exitCode !== null) throw new Error(`perf record could not attach: ${perfErrors}`)
  const before = cpuSeconds(pid)
  const mainBefore = mainThreadCpuSeconds(pid)
  const result = await load({ ...options, connections: 16, seconds: 0, amount: requests })
  const mainUsed = mainThreadCpuSeconds(pid) - mainBefore
  const used = cpuSeconds(pid) - before
  perf.kill("SIGINT")
  await perfExited
  const answered = (result.statusCodes["200"] ?? 0) + (result.statusCodes["201"] ?? 0)
  if (result.total === 0 || answered !== result.total || result.errors > 0) {
    throw new Error(`${scenario}: ${JSON.stringify(result.statusCodes)}, ${result.errors} errors`)
  }

  const perRequest = (seconds: number) => (seconds * 1e6 / result.total).toFixed(1)
  console.log(
    `${scenario}: ${result.total} requests; CPU ${perRequest(used)} µs/request from /proc ` +
      `(main thread ${perRequest(mainUsed)}, other threads ${perRequest(used - mainUsed)}), with perf sampling`
  )
  // Threads: `--sort pid` names each thread "tid:comm"; the main thread's id is the process id.
  const threads = report("pid").flatMap((text) => {
    const match = /^\s*([\d.]+)%\s+(\d+):/.exec(text)
    return match === null ? [] : [{ share: Number(match[1]), tid: Number(match[2]) }]
  })
  const mainShare = threads.filter((t) => t.tid === pid).reduce((sum, t) => sum + t.share, 0)
  console.log(`samples: main thread ${mainShare.toFixed(1)} %, ${threads.length - 1} other threads ${(100 - mainShare).toFixed(1)} %`)

  const lines = symbolLines()
  const kinds = new Map<string, number>()
  for (const line of lines) kinds.set(kindOf(line), (kinds.get(kindOf(line)) ?? 0) + line.share)
  console.log("by kind (share of samples ≈ share of the process's CPU):")
  for (const [kind, share] of [...kinds].sort((x, y) => y[1] - x[1])) console.log(`  ${share.toFixed(1).padStart(5)} %  ${kind}`)
  console.log("top symbols:")
  for (const line of lines.slice(0, 25)) console.log(`  ${line.share.toFixed(2).padStart(5)} %  ${line.symbol.slice(0, 130)}  (${line.dso})`)
} finally {
  for (const child of started.reverse()) await child.stop()
  // --perf-basic-prof's symbol maps (one per process, /tmp/perf-<pid>.map) are read by `perf report` only.
  for (const child of started) if (child.child.pid !== undefined) rmSync(`/tmp/perf-${child.child.pid}.map`, { force: true })
  await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  rmSync(scratch, { recursive: true, force: true })
}
