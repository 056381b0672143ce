// `node --import tsx bench/tools/gcTrace.ts [dir] [machine|mcp|mcp2026|replay|created|events] [requests] [rounds] [connections]`: what the
// garbage collector and the compiler do per request. The compiled service of checkout `dir` (default `.`,
// `npm run build` first; a copy of dist/ with one change in it works too, which is how docs/PERFORMANCE.md's
// eighth pass attributed a new receipt's CPU) runs one process on a fresh PostgreSQL database with npm start's
// node flags (this checkout's package.json, or BENCH_NODE_FLAGS) plus `--trace-gc-nvp --trace-opt --trace-deopt`.
// After a warm-up of a third of `requests`, each of `rounds` (default 2) rounds of `requests` (default 10,000) at
// `connections` (default 16) prints: CPU µs per request from /proc, split into the main thread and the others (V8's collection
// and compilation threads, libuv's pool); young-generation collections, the bytes allocated since the collection
// before each (V8's `allocated`: every space, since a collection of either kind) and the share of what survived
// one that the next promoted (V8's `promotion_rate`); bytes promoted to the old generation and bytes that survived
// a young collection without being promoted, per request; full collections; TurboFan and Maglev compilations with
// their compiler time (the background phase, V8's middle "took" figure) and deoptimisations; latency p50/p99.
// Later rounds run after more warm-up: a compilation or deoptimisation still counted there is the steady state.
// V8 writes its trace through a buffered stdout (about 4 KB, two or three collections' lines), so a round's slice
// of it may hold a few lines of the one before or miss its own last few: the per-request figures are good to a
// few per cent, the small counts (full collections, compilations) to a few.
import { load, measuredLoad, type ScenarioService, startScenarioService } from "../lib.js"

const [dir = ".", scenario = "created", requestsArg = "10000", roundsArg = "2", connectionsArg = "16"] = process.argv.slice(2)
const requests = Number(requestsArg)
const rounds = Number(roundsArg)
const connections = Number(connectionsArg)
if (!(Number.isInteger(requests) && requests > 0 && Number.isInteger(rounds) && rounds > 0 && Number.isInteger(connections) && connections > 0)) {
  throw new Error("usage: bench/tools/gcTrace.ts [dir] [machine|mcp|mcp2026|replay|created|events] [requests > 0] [rounds > 0] [connections > 0]")
}

/**
 * Sums of the young collections' `allocated=`, `promoted=`, `new_space_survived=` and `promotion_rate=` fields in
 * V8's `--trace-gc-nvp` lines.
 */
const youngCollections = (trace: string) => {
  let count = 0, allocated = 0, promoted = 0, survived = 0, promotionRates = 0
  for (const line of trace.split("\n")) {
    if (!line.includes(" gc=s ")) continue
    const field = (name: string) => Number(new RegExp(` ${name}=([\\d.]+)`).exec(line)?.[1] ?? Number.NaN)
    const fields = [field("allocated"), field("promoted"), field("new_space_survived"), field("promotion_rate")]
    // A line the buffered trace cut short is left out rather than turning the sums into NaN.
    if (fields.some(Number.isNaN)) continue
    count++
    allocated += fields[0]!
    promoted += fields[1]!
    survived += fields[2]!
    promotionRates += fields[3]!
  }
  return { count, allocated, promoted, survived, promotionRate: count === 0 ? Number.NaN : promotionRates / count }
}

/** TurboFan and Maglev compilations finished in `trace` (`--trace-opt`), with the sum of their background phases. */
const compilations = (trace: string, target: "TURBOFAN" | "MAGLEV") => {
  let count = 0, milliseconds = 0
  // "(target TURBOFAN) - took a, b, c ms", also "(target TURBOFAN) OSR - took …", and V8 13's "TURBOFAN_JS".
  const finished = new RegExp(`completed compiling[^\\n]*target ${target}(?:_JS)?\\)(?: OSR)? - took [\\d.]+, ([\\d.]+), [\\d.]+ ms`, "g")
  for (const match of trace.matchAll(finished)) {
    count++
    milliseconds += Number(match[1])
  }
  return { count, milliseconds }
}

let running: ScenarioService | undefined
try {
  running = await startScenarioService(dir, ["--trace-gc-nvp", "--trace-opt", "--trace-deopt"], { databasePrefix: "pv_gctrace", chain: scenario === "events" })
  const { service, scenarios } = running
  const options = scenarios[scenario]
  if (options === undefined) throw new Error(`unknown scenario ${scenario}: one of ${Object.keys(scenarios).join(", ")}`)
  await load({ ...options, connections, seconds: 0, amount: Math.max(1_000, Math.floor(requests / 3)) })
  const pid = service.child.pid!
  for (let round = 1; round <= rounds; round++) {
    // Cut at line ends: a line the buffer split belongs to the slice it ends in.
    const traceFrom = service.output().lastIndexOf("\n") + 1
    const { result, used, mainUsed } = await measuredLoad(`${scenario} round ${round}`, pid, options, requests, connections)
    const output = service.output()
    const trace = output.slice(traceFrom, output.lastIndexOf("\n") + 1)
    const young = youngCollections(trace)
    const turbofan = compilations(trace, "TURBOFAN")
    const maglev = compilations(trace, "MAGLEV")
    const per = (x: number) => (x / result.total).toFixed(0)
    console.log(
      `${scenario} round ${round}: ${result.total} requests, ${JSON.stringify(result.statusCodes)}; CPU ${(used * 1e6 / result.total).toFixed(1)} µs/request ` +
        `(main thread ${(mainUsed * 1e6 / result.total).toFixed(1)}, other threads ${((used - mainUsed) * 1e6 / result.total).toFixed(1)}); ` +
        (young.count === 0
          ? "no young collections; "
          : `${young.count} young collections (${(young.allocated / young.count / 1e6).toFixed(1)} MB allocated since the collection before each, ` +
            `promotion rate ${young.promotionRate.toFixed(0)} %), promoted ${per(young.promoted)} B/request, ` +
            `survived one without promotion ${per(young.survived)} B/request; `) +
        `${(trace.match(/gc=mc/g) ?? []).length} full collections; compilations: ${turbofan.count} TurboFan (${turbofan.milliseconds.toFixed(0)} ms), ` +
        `${maglev.count} Maglev (${maglev.milliseconds.toFixed(0)} ms); ${(trace.match(/\[bailout \(kind: deopt/g) ?? []).length} deoptimisations; ` +
        `p50 ${result.p50} ms, p99 ${result.p99} ms`
    )
  }
} finally {
  await running?.close()
}
