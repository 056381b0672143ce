// `node --import tsx bench/tools/perfProfile.ts [dir] [machine|mcp|mcp2026|replay|created|events|bprime|rprime] [requests]`: where a
// request's CPU goes, as the operating system sees it: Linux `perf` samples every thread of the service process
// on the CPU clock (`perf record -e cpu-clock`), so the JavaScript, V8's garbage collection and compilation threads,
// the kernel's share of the sockets and native code (OpenSSL, llhttp, libuv) are all in one picture. V8's own
// profiler (the former bench/profileCompiled.ts) samples the main thread only and by wall clock: a thread that the kernel
// put aside during a `write` still shows as busy in it, and the collector's and compiler's threads not at all.
//
// The compiled service of checkout `dir` (a path from the working directory, default `.`; `npm run build` first,
// or a copy of dist/ with one change in it) runs one process on a fresh PostgreSQL database with npm start's node
// flags (this checkout's package.json, or BENCH_NODE_FLAGS) plus `--perf-basic-prof` (so perf can name
// JIT-compiled functions). After a warm-up of `requests` (default 20,000) requests at 16 connections, perf samples
// the process at 4,999 Hz from 0.3 s before `requests` more until they are answered, and this prints: CPU µs per
// request from /proc over those requests (main thread and the others); the samples (counts, not rounded
// percentages) split by thread and by kind, as the symbols' names and objects say: JavaScript by package (self
// time of JIT-compiled functions only: without call graphs, the builtins and runtime functions JavaScript calls,
// and interpreted frames, count under their own kinds), V8's builtins, young and full garbage collections, lazy
// and optimising compilation, crypto, JSON, the kernel, libc, other native code; and the 25 symbols with most
// samples. `bprime` profiles bench/baselines/bearerApi.ts, the (b') of `npm run bench:cpu`, answering the
// service's trust document under the same key, with node's default flags as there (BENCH_BASELINE_NODE_FLAGS
// gives it flags); `rprime` profiles bench/baselines/receiptApi.ts, the (r'), taking new receipts as `created`
// sends them (on a database of its own, dropped afterwards). Needs `perf` (Debian's linux-perf) and root, or kernel.perf_event_paranoid ≤ 1 (at 2 perf
// attaches but drops the kernel's samples, so the tool refuses); the sampling adds a few per cent of CPU.
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { adminQuery, benchAdminUrl, load, measuredLoad, type Process, root, type ScenarioService, startProcess, startScenarioService } from "../lib.js"
import { originalSymbol } from "../sourceMapped.js"

const [dir = ".", scenario = "machine", requestsArg = "20000"] = process.argv.slice(2)
const requests = Number(requestsArg)
if (!(Number.isInteger(requests) && requests > 0)) {
  throw new Error("usage: bench/tools/perfProfile.ts [dir] [machine|mcp|mcp2026|replay|created|events|bprime|rprime] [requests > 0]")
}
if (spawnSync("perf", ["--version"]).status !== 0) throw new Error("perf is not installed (Debian: apt-get install linux-perf)")
const paranoid = (() => {
  try {
    return Number(readFileSync("/proc/sys/kernel/perf_event_paranoid", "utf8").trim())
  } catch {
    return Number.NaN
  }
})()
if (process.getuid?.() !== 0 && !(paranoid <= 1)) {
  throw new Error(`perf would drop the kernel's samples: run as root, or set kernel.perf_event_paranoid to 1 or less (it is ${paranoid})`)
}

/** Where the profiled code's own JavaScript lives (real paths, as Node names modules): the checkout's compiled service, or the bench's baselines. */
const realPath = (path: string) => {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}
const ownCode = [
  pathToFileURL(realPath(resolve(dir, "dist/src"))).href + "/",
  // The bundled service's symbols, named by their original files (bench/sourceMapped.ts).
  pathToFileURL(realPath(resolve(dir, "src"))).href + "/",
  pathToFileURL(realPath(resolve(root, "bench"))).href + "/"
]

/** One row of `perf report -n --sort dso,sym`: its samples, the object it ran in, the symbol, kernel or not. */
interface Row {
  readonly samples: number
  readonly dso: string
  readonly symbol: string
  readonly kernel: boolean
}

/** `perf report` of the samples file, tab-separated with sample counts; its header lines (`#`) kept apart. */
const report = (samplesFile: string, sort: string): { readonly header: Array<string>; readonly rows: Array<Array<string>> } => {
  const run = spawnSync("perf", [
    "report", "-i", samplesFile, "-n", "--no-children", "--sort", sort, "-g", "none", "--stdio", "--percent-limit", "0", "-t", "\t"
  ], { encoding: "utf8", maxBuffer: 256 * 1024 * 1024 })
  if (run.status !== 0) throw new Error(`perf report failed: ${run.stderr}`)
  const lines = run.stdout.split("\n").filter((line) => line.trim() !== "")
  return {
    header: lines.filter((line) => line.startsWith("#")),
    rows: lines.filter((line) => !line.startsWith("#")).map((line) => line.split("\t").map((field) => field.trim()))
  }
}

/** `report(…, "dso,sym")`'s rows ("overhead, samples, object, [.] or [k] symbol") as `Row`s. */
const symbolRows = (rows: ReadonlyArray<ReadonlyArray<string>>): Array<Row> =>
  rows.flatMap(([, samples, dso, symbol]) => {
    const match = symbol === undefined ? null : /^\[([.k])\]\s+(.*)$/.exec(symbol)
    return match === null || dso === undefined ? [] : [{ samples: Number(samples), dso, kernel: match[1] === "k", symbol: originalSymbol(match[2]!) }]
  })

/**
 * What a sampled symbol is, by its name and object: a reading of names, good to a per cent or two. Garbage
 * collection code that young and full collections share (worklists, object sizes, visitors' bodies, remembered
 * sets, array buffer sweeping) counts as "other", so the young and full rows hold only their own.
 */
const kindOf = ({ dso, kernel, symbol }: Row): string => {
  if (kernel) return "kernel (system calls, TCP, scheduling)"
  if (symbol.startsWith("JS:")) {
    if (ownCode.some((prefix) => symbol.includes(prefix))) return "JavaScript: the service's own (or the baseline's)"
    if (/node_modules\/(effect|@effect)\//.test(symbol)) return "JavaScript: effect, @effect/*"
    if (/ node:/.test(symbol)) return "JavaScript: Node.js's own"
    return "JavaScript: other"
  }
  if (symbol.startsWith("RegExp:")) return "regular expressions (V8's compiled code)"
  if (dso.startsWith("[JIT]") || dso === "[unknown]" || symbol.startsWith("[unknown]")) return "JIT-compiled or unknown code without a name"
  // Builtins_Maglev… are runtime stubs the compiled code calls, not the compiler.
  if (!symbol.startsWith("Builtins_") && /compiler::|turboshaft|maglev::|Maglev|CompileOptimized|TurbofanCompilationJob|OptimizedCompilationJob|PipelineCompilationJob/.test(symbol)) {
    return "V8 optimising compilers (TurboFan, Maglev)"
  }
  if (
    symbol === "Builtins_CompileLazy" ||
    /v8::internal::(Runtime_CompileLazy|Parser|PreParser|Scanner|AstValueFactory|DeclarationScope|Scope::|baseline::|interpreter::BytecodeGenerator|interpreter::BytecodeArrayBuilder)/
      .test(symbol) ||
    /v8::internal::Compiler::Compile(?!Optimized)/.test(symbol)
  ) return "V8 lazy and baseline compilation (CompileLazy, parser, bytecode, Sparkplug)"
  // The collectors: names that say which one first (template arguments included), then what both use.
  if (/ArrayBufferSweeper/.test(symbol)) return "V8 garbage collection: other (shared by both, allocation, remembered sets)"
  if (/MarkCompact|Marking|Evacuat|Compactor|Sweeper::/.test(symbol)) {
    return "V8 garbage collection: full collections (marking, sweeping, compaction)"
  }
  if (/Scaveng/.test(symbol)) return "V8 garbage collection: young generation (scavenges)"
  if (
    /Worklist|HeapObject::SizeFromMap|BodyDescriptor|RememberedSet|SlotSet|TypedSlot|NewSpace|SemiSpace|Heap::|FreeList|PagedSpace|LargeObjectSpace|GCTracer|MemoryAllocator|ObjectVisitor/
      .test(symbol)
  ) return "V8 garbage collection: other (shared by both, allocation, remembered sets)"
  if (/^(fe_|ge_|x25519|X25519|ED25519|ed25519|sha256|SHA256|sha512|SHA512|cmov|sc_|EVP_|OPENSSL_|ossl_|bn_|BN_|CRYPTO_|table_select)/.test(symbol)) {
    return "crypto (OpenSSL)"
  }
  if (/Json(Stringifier|Parser)|JSON/.test(symbol)) return "V8 JSON"
  if (symbol.startsWith("Builtins_")) return "V8 builtins (interpreter, inline caches, calls)"
  if (/libc\.so|libstdc\+\+|libgcc|libm\.so/.test(dso)) return "libc (memory, strings)"
  return "other native (V8 runtime, Node.js, libuv, llhttp)"
}

/** Signals perf to stop and waits until it has written its file (SIGKILL after 10 s). */
const stopRecorder = async (recorder: ChildProcess, exited: Promise<void>) => {
  if (recorder.exitCode !== null || recorder.signalCode !== null) return
  recorder.kill("SIGINT")
  const timer = setTimeout(() => {
    recorder.kill("SIGKILL")
    process.stderr.write("perf record did not stop within 10 s of SIGINT and was killed: its file may be incomplete\n")
  }, 10_000)
  await exited
  clearTimeout(timer)
}

let running: ScenarioService | undefined
let baseline: Process | undefined
let recording: { readonly recorder: ChildProcess; readonly exited: Promise<void> } | undefined
let scratch: string | undefined
let baselineDb: string | undefined
try {
  scratch = mkdtempSync(join(tmpdir(), "pv-perf-"))
  const samplesFile = join(scratch, "perf.data")
  running = await startScenarioService(dir, ["--perf-basic-prof"], { databasePrefix: "pv_perf", chain: scenario === "events" })
  const { service, scenarios } = running
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
    baseline = await startProcess("bench/baselines/bearerApi.ts", { BENCH_DOCUMENT_FILE: documentFile, BENCH_KEY: key }, [], [...baselineFlags, "--perf-basic-prof"])
    target = baseline
    options = { ...machine, url: machine.url.replace(service.baseUrl, baseline.baseUrl) }
  }
  if (scenario === "rprime") {
    // (r') as bench/cpu.ts starts it: the service's trust document, the scenarios' key, a database of its own.
    const machine = scenarios.machine!, created = scenarios.created!
    const documentFile = join(scratch, "machine.json")
    const headers = machine.headers ?? {}
    writeFileSync(documentFile, await fetch(machine.url, { headers }).then((r) => r.text()))
    const key = (headers.authorization ?? "").slice("Bearer ".length)
    baselineDb = `pv_perf_r_${Date.now()}`
    await adminQuery(`CREATE DATABASE ${baselineDb}`)
    const databaseUrl = new URL(benchAdminUrl)
    databaseUrl.pathname = `/${baselineDb}`
    const baselineFlags = (process.env.BENCH_BASELINE_NODE_FLAGS ?? "").split(" ").filter((flag) => flag !== "")
    const publicId = (JSON.parse(String(created.body)) as { subject_public_id: string }).subject_public_id
    baseline = await startProcess("bench/baselines/receiptApi.ts", {
      BENCH_DOCUMENT_FILE: documentFile, BENCH_PUBLIC_ID: publicId, BENCH_KEY: key, DATABASE_URL: databaseUrl.toString()
    }, [], [...baselineFlags, "--perf-basic-prof"])
    target = baseline
    options = { ...created, url: created.url.replace(service.baseUrl, baseline.baseUrl) }
  }
  if (options === undefined) throw new Error(`unknown scenario ${scenario}: one of ${[...Object.keys(scenarios), "bprime", "rprime"].join(", ")}`)
  await load({ ...options, connections: 16, seconds: 0, amount: requests })

  const pid = target.child.pid!
  // --no-buildid-cache: nothing copied into ~/.debug (node's binary alone is ~100 MB).
  const recorder = spawn("perf", ["record", "--no-buildid-cache", "-F", "4999", "-e", "cpu-clock", "-p", String(pid), "-o", samplesFile], {
    stdio: ["ignore", "ignore", "pipe"]
  })
  let perfMessages = ""
  recorder.stderr.on("data", (chunk) => (perfMessages += chunk))
  recorder.on("error", (error) => (perfMessages += `\n${error.message}`))
  recording = { recorder, exited: new Promise<void>((done) => recorder.once("close", () => done())) }
  await new Promise((settle) => setTimeout(settle, 300))
  if (recorder.exitCode !== null || recorder.signalCode !== null) throw new Error(`perf record could not attach: ${perfMessages}`)
  const { result, used, mainUsed } = await measuredLoad(scenario, pid, options, requests)
  await stopRecorder(recorder, recording.exited)
  recording = undefined

  const perRequest = (seconds: number) => (seconds * 1e6 / result.total).toFixed(1)
  console.log(
    `${scenario}: ${result.total} requests; CPU ${perRequest(used)} µs/request from /proc ` +
      `(main thread ${perRequest(mainUsed)}, other threads ${perRequest(used - mainUsed)}), with perf sampling`
  )
  const bySymbolReport = report(samplesFile, "dso,sym")
  const rows = symbolRows(bySymbolReport.rows)
  const total = rows.reduce((sum, row) => sum + row.samples, 0)
  if (total === 0) throw new Error(`perf recorded no samples: ${perfMessages}`)
  if (!rows.some((row) => row.kernel)) throw new Error(`perf recorded no kernel samples (not allowed to?): ${perfMessages}`)
  const lost = bySymbolReport.header.map((line) => /Total Lost Samples: (\d+)/.exec(line)?.[1]).find((n) => n !== undefined)
  const percent = (samples: number) => `${(100 * samples / total).toFixed(1).padStart(5)} %`
  // Threads: `--sort pid` names each thread "tid:comm"; the main thread's id is the process id.
  const threads = report(samplesFile, "pid").rows.flatMap(([, samples, thread]) => {
    const tid = /^(\d+):/.exec(thread ?? "")?.[1]
    return tid === undefined ? [] : [{ samples: Number(samples), tid: Number(tid) }]
  })
  const threadSamples = threads.reduce((sum, t) => sum + t.samples, 0)
  if (threadSamples !== total) throw new Error(`perf report's rows by thread (${threadSamples} samples) and by symbol (${total}) disagree: a format this tool does not read`)
  const mainSamples = threads.filter((t) => t.tid === pid).reduce((sum, t) => sum + t.samples, 0)
  console.log(
    `${total} samples (${lost ?? "?"} lost): main thread ${percent(mainSamples).trim()}, ` +
      `${threads.length - 1} other threads ${percent(total - mainSamples).trim()}`
  )
  const kinds = new Map<string, number>()
  for (const row of rows) {
    const kind = kindOf(row)
    kinds.set(kind, (kinds.get(kind) ?? 0) + row.samples)
  }
  console.log("by kind (share of the samples ≈ share of the process's CPU):")
  for (const [kind, samples] of [...kinds].sort((x, y) => y[1] - x[1])) console.log(`  ${percent(samples)}  ${kind}`)
  // A function compiled more than once is several rows of one name: counted together.
  const bySymbol = new Map<string, { samples: number; dso: string }>()
  for (const row of rows) {
    const known = bySymbol.get(row.symbol)
    bySymbol.set(row.symbol, { samples: (known?.samples ?? 0) + row.samples, dso: known?.dso ?? row.dso })
  }
  console.log("top symbols:")
  for (const [symbol, { samples, dso }] of [...bySymbol].sort((x, y) => y[1].samples - x[1].samples).slice(0, 25)) {
    console.log(`  ${percent(samples)}  ${symbol.slice(0, 130)}  (${dso})`)
  }
} finally {
  // perf stops by itself when its process exits; a failed load must not leave it writing into a removed directory.
  if (recording !== undefined) await stopRecorder(recording.recorder, recording.exited)
  const pids = [running?.service.child.pid, baseline?.child.pid]
  try {
    await baseline?.stop()
    await running?.close()
  } finally {
    // --perf-basic-prof's symbol maps (one per process, /tmp/perf-<pid>.map) are read by `perf report` only.
    for (const pid of pids) if (pid !== undefined) rmSync(`/tmp/perf-${pid}.map`, { force: true })
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true })
    // A failed drop is reported, not thrown: it must not hide the run's own error.
    if (baselineDb !== undefined) {
      await adminQuery(`DROP DATABASE IF EXISTS ${baselineDb} WITH (FORCE)`).catch((error) => console.error(`could not drop ${baselineDb}:`, error))
    }
  }
}
