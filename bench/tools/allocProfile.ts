// `node --import tsx bench/tools/allocProfile.ts [dir] [scenario] [requests] [--survivors] [--warm N] [--depth D] [--top N] [--connections C]`:
// where a request's heap allocations come from, by allocation site, with V8's sampling heap profiler (one sample
// per 128 bytes on average). The compiled service of checkout `dir` (default `.`; a copy of dist/ with one change
// works too) runs one process on a fresh PostgreSQL database (bench/lib.ts startScenarioService) with
// `--inspect` on a free port; after `--warm` requests (default 5,000) it samples `requests` more (default 5,000)
// of `scenario` (machine, mcp, mcp2026, replay, created, events) at `--connections` (default 16) and prints bytes
// per request, in total and for the `--top` (default 25) sites, each with `--depth` (default 6) frames of its
// JavaScript stack (an Effect program's own steps run inside the fiber loop, so its frames are Effect's).
// - default: every allocation, also those collected since (what a request allocates: a deterministic measure of
//   its work, steadier than CPU time on a noisy machine);
// - `--survivors`: only what young collections did not free (promoted, or still alive): after the load, the
//   collector is asked for young collections until the young generation holds nothing of it, and V8 keeps
//   the samples full collections freed. A request whose objects show here outlives a young collection: held
//   by something long-lived (a cache), or by a dead object the young collector cannot tell from a live one
//   (`git show ca4607b:docs/PERFORMANCE.md`, "Tenth pass"). Run with a `requests` small enough that few full collections happen,
//   as the note printed says.
import { load, type ScenarioService, startScenarioService } from "../lib.js"
import { originalOf, shortPath } from "../sourceMapped.js"

const positional: Array<string> = []
const flags = new Map<string, string>()
const argv = process.argv.slice(2)
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i]!
  if (arg === "--survivors") flags.set("survivors", "true")
  else if (arg.startsWith("--")) flags.set(arg.slice(2), argv[++i] ?? "")
  else positional.push(arg)
}
const [dir = ".", scenario = "machine", requestsArg = "5000"] = positional
const numberFlag = (name: string, fallback: number) => {
  const value = Number(flags.get(name) ?? fallback)
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} must be a whole number`)
  return value
}
const requests = Number(requestsArg)
if (!Number.isInteger(requests) || requests <= 0) throw new Error("requests must be a whole number > 0")
const survivors = flags.has("survivors")
const warm = numberFlag("warm", 5_000)
const depth = numberFlag("depth", 6)
const top = numberFlag("top", 25)
const connections = Math.max(1, numberFlag("connections", 16))

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber: number
}
interface ProfileNode {
  readonly callFrame: CallFrame
  readonly selfSize: number
  readonly children: ReadonlyArray<ProfileNode>
}

/** A minimal Chrome DevTools Protocol client over the inspector's WebSocket. */
const devtools = async (url: string) => {
  const socket = new WebSocket(url)
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the inspector at ${url} did not answer`)), 10_000)
    socket.addEventListener("open", () => (clearTimeout(timer), resolve(undefined)), { once: true })
    socket.addEventListener("error", () => (clearTimeout(timer), reject(new Error(`the inspector at ${url} refused`))), { once: true })
  })
  let nextId = 0
  const pending = new Map<number, { resolve: (result: unknown) => void; reject: (error: Error) => void }>()
  socket.addEventListener("message", (message) => {
    const data = JSON.parse(String(message.data)) as { id?: number; result?: unknown; error?: { message: string } }
    if (data.id === undefined) return
    const waiting = pending.get(data.id)
    pending.delete(data.id)
    if (data.error !== undefined) waiting?.reject(new Error(data.error.message))
    else waiting?.resolve(data.result)
  })
  return {
    call: <A>(method: string, params: object = {}) =>
      new Promise<A>((resolve, reject) => {
        const id = ++nextId
        pending.set(id, { resolve: resolve as (result: unknown) => void, reject })
        socket.send(JSON.stringify({ id, method, params }))
      }),
    close: () => socket.close()
  }
}

const frameName = (frame: CallFrame) => {
  // The bundled service's frames at their places in the original files (bench/sourceMapped.ts).
  const original = originalOf({ url: frame.url, line: frame.lineNumber, column: frame.columnNumber })
  const where = shortPath(original.url.replace(/^file:\/\//, ""))
  return `${frame.functionName || "(anonymous)"} ${where}${where === "" ? "" : `:${original.line + 1}`}`
}

/** Bytes by allocation site: the innermost `depth` frames of each sampled allocation's stack. */
const bySite = (root: ProfileNode) => {
  const sites = new Map<string, number>()
  const walk = (node: ProfileNode, stack: Array<string>) => {
    const here = [...stack, frameName(node.callFrame)]
    if (node.selfSize > 0) {
      const key = here.slice(-depth).reverse().join("\n        < ")
      sites.set(key, (sites.get(key) ?? 0) + node.selfSize)
    }
    for (const child of node.children) walk(child, here)
  }
  walk(root, [])
  return sites
}

let running: ScenarioService | undefined
try {
  running = await startScenarioService(dir, ["--inspect=127.0.0.1:0", "--expose-gc", "--trace-gc"], { databasePrefix: "pv_alloc" })
  const { service, scenarios } = running
  const options = scenarios[scenario]
  if (options === undefined) throw new Error(`unknown scenario ${scenario}: one of ${Object.keys(scenarios).join(", ")}`)
  const inspector = /Debugger listening on (ws:\/\/\S+)/.exec(service.output())?.[1]
  if (inspector === undefined) throw new Error("the service did not open its inspector")
  if (warm > 0) await load({ ...options, connections, seconds: 0, amount: warm })
  const session = await devtools(inspector)
  try {
    await session.call("HeapProfiler.enable")
    await session.call("HeapProfiler.collectGarbage")
    await session.call("HeapProfiler.startSampling", {
      samplingInterval: 128,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: !survivors
    })
    const traceFrom = service.output().length
    const result = await load({ ...options, connections, seconds: 0, amount: requests })
    const answered = (result.statusCodes["200"] ?? 0) + (result.statusCodes["201"] ?? 0)
    if (answered !== result.total) throw new Error(`${scenario}: ${JSON.stringify(result.statusCodes)}`)
    // Young collections until the young generation holds nothing of the load (each empties what the one before
    // kept), so what is left sampled survived on its own.
    const trace = service.output().slice(traceFrom)
    if (survivors) {
      const forced = await session.call<{ exceptionDetails?: { text: string } }>("Runtime.evaluate", {
        expression: "for (let i = 0; i < 3; i++) gc({ type: 'minor' })"
      })
      if (forced.exceptionDetails !== undefined) throw new Error(`the young collections could not be forced: ${forced.exceptionDetails.text}`)
    }
    const { profile } = await session.call<{ profile: { head: ProfileNode } }>("HeapProfiler.getSamplingProfile")
    await session.call("HeapProfiler.stopSampling")
    const fullCollections = (trace.match(/Mark-Compact/g) ?? []).length
    const sites = [...bySite(profile.head)].sort((a, b) => b[1] - a[1])
    const total = sites.reduce((sum, [, bytes]) => sum + bytes, 0)
    console.log(
      `${scenario}: ${result.total} requests at ${connections} connections after ${warm}; ` +
        `${survivors ? "survived young collections" : "allocated"}: ${(total / result.total).toFixed(0)} B/request ` +
        `(${(trace.match(/Scavenge/g) ?? []).length} young and ${fullCollections} full collections meanwhile)`
    )
    if (survivors && fullCollections > 0) {
      console.log("  (full collections ran meanwhile: what they freed of the young generation counts too; fewer requests avoid that)")
    }
    for (const [site, bytes] of sites.slice(0, top)) console.log(`${(bytes / result.total).toFixed(0).padStart(7)} B  ${site}`)
  } finally {
    session.close()
  }
} finally {
  await running?.close()
}
