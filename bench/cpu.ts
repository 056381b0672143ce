// `npm run bench:cpu` (also `npm run bench -- --cpu`): server CPU time per request, in a few minutes. The one
// service process on a fresh PostgreSQL database (DATABASE_URL's server, default postgres://postgres@127.0.0.1:5432/
// postgres; dropped afterwards) and three baselines, each measured as utime + stime from /proc of the serving process
// (and its children) over exactly `--requests` requests (default 10,000) at `--connections` (default 16), after a
// warm-up, all in the same run:
//   (a)  bare node:http answering the same bytes as GET /machine;
//   (b') an HttpApi endpoint with a path parameter and an HttpApiSecurity.bearer middleware that looks the key's
//        SHA-256 up in a Map, answering a document of the trust document's size through its success schema
//        (bench/baselines/bearerApi.ts), from the same `effect` as the service;
//   (r') (b')'s HttpApi and bearer middleware with a POST endpoint doing a new receipt's work in the plain way: the
//        service's request schema, evaluation, digest, Ed25519 signature, ids and success schema, one autocommitted
//        INSERT of the receipt and its pending log entry per request (bench/baselines/receiptApi.ts, a database of
//        its own): what the framework and the work itself cost written plainly, against which the new receipt's row
//        is also shown (row `r` for `--only`);
//   (r0) (r')'s work behind bare node:http instead of HttpApi (bench/baselines/receiptHttp.ts, a database of its own):
//        (r') ÷ (r0) is what the framework costs a new receipt (row `r0`).
// The log's public reads (issue 38) are measured against (s), bare node:http answering each read's recorded answer,
// the same bytes with the same headers (bench/baselines/staticBytes.ts), in a log of 61 events and 300 receipts:
// a full hash tile and a full entry bundle (≤ 1.5 × (s)), the partial tile of the tree as it is when its row runs,
// the checkpoint and the key (≤ 2 × (s)); inclusion and consistency proofs against GET /machine (≤ 1.0 ×). Rows
// `tile,bundle,partial,checkpoint,key,inclusion,consistency` for `--only` (each brings its (s) row).
// CPU per request is steadier than requests per second on a shared machine: the load generator's own CPU is not
// counted, and a noisy neighbour slows the run without changing what each request costs. Each measurement's log
// line also says how much of it ran off the main thread (V8's garbage collection and compilation threads, and
// child processes: a baseline run through tsx keeps an esbuild service process).
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { mcp2025Body, mcp2026Body, mcp2026Headers } from "./data.js"
import { adminQuery, benchAdminUrl, load, type LoadOptions, measuredLoad, type Process, serviceNodeFlags, startProcess } from "./lib.js"

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "10000" }, connections: { type: "string", default: "16" }, cpu: { type: "boolean", default: true },
    rounds: { type: "string", default: "3" },
    only: { type: "string" }
  },
  strict: false
})
const requests = Number(values.requests)
// `--rounds N`: every row measured N times, the rows' order rotated each round (so a drift of the machine weighs
// on every row alike); each ratio is the median of its per-round ratios (the two measured minutes apart, not
// far apart), each µs figure the median of its rounds.
const rounds = Math.max(1, Number(values.rounds))
// `--only machine,mcp2026`: just these rows (GET /machine is always measured: the ratios are against it).
const only = typeof values.only === "string" ? new Set(["machine", ...values.only.split(",")]) : undefined
const wanted = (name: string) => only === undefined || only.has(name.replace(/^s-/, ""))
const connections = Number(values.connections)
const operatorToken = `bench_${randomBytes(24).toString("hex")}`
const pem = () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const adminUrl = benchAdminUrl
const publicId = "DET-V1-BENCH-CPU-0001"
const dir = mkdtempSync(join(tmpdir(), "pv-bench-cpu-"))
const log = (line: string) => console.error(`[bench:cpu] ${line}`)

const withAdmin = adminQuery

const determination = (tier: string, limitation: string) => {
  const asOf = Date.now() - 86_400_000
  return {
    subject: { subject_id: "sub_bench_cpu", physical_subject_id: "phys_bench_cpu", identity_state: "VERIFIED" },
    tier, eligible: true, why_this_tier: ["Registry identity verified", "Site audit passed"], why_not_higher: ["Second audit missing"],
    claims: [
      { claim_id: "c1", type: "legal_name", value: "Bench Robotics Ltd", scope: "identity" },
      { claim_id: "c2", type: "registration", value: "GB-0001234", scope: "identity" }
    ],
    evidence: [
      { evidence_id: "ev1", kind: "registry_extract", digest: "a".repeat(64), collected_at: new Date(asOf).toISOString(), source: "registry" },
      { evidence_id: "ev2", kind: "site_audit", digest: "b".repeat(64), collected_at: new Date(asOf).toISOString(), source: "auditor" }
    ],
    allowed_claims: ["identity", "assurance"], limitations: ["Entity only", limitation], prohibited_inferences: ["credential_issued"],
    lifecycle_state: "NOT_ISSUED", as_of: new Date(asOf).toISOString(), valid_until: new Date(asOf + 100 * 86_400_000).toISOString(),
    engine: { name: "bench", version: "1.0.0" }
  }
}

type Target = Omit<LoadOptions, "connections" | "seconds">

/** CPU µs per request of `target` over exactly `requests` requests, after a warm-up of a tenth as many. */
const measure = async (name: string, target: Process, given: Target | (() => Promise<Target>), row?: string) => {
  if (row !== undefined && !wanted(row)) return Number.NaN
  const options = typeof given === "function" ? await given() : given
  await load({ ...options, connections, seconds: 0, amount: Math.max(1_000, Math.floor(requests / 10)) })
  const pid = target.child.pid!
  const { result, used, mainUsed } = await measuredLoad(name, pid, options, requests, connections)
  const micros = (used * 1e6) / result.total
  // The main thread runs the JavaScript; the rest is V8's garbage collection and compilation threads, libuv's pool
  // and any child process (a tsx-run baseline keeps an esbuild service process, about 1 ms of CPU a second).
  const share = used > 0 && !Number.isNaN(mainUsed) ? `${Math.max(0, (100 * (used - mainUsed)) / used).toFixed(0)} %` : "n/a"
  log(`${name}: ${micros.toFixed(1)} µs/request, ${share} of it off the main thread (${result.total} requests, ${result.requestsPerSecond.toFixed(0)} req/s)`)
  return micros
}

const dbName = `pv_bench_cpu_${Date.now()}`
await withAdmin(`CREATE DATABASE ${dbName}`)
const databaseUrl = new URL(adminUrl)
databaseUrl.pathname = `/${dbName}`
// (r') writes its receipts to a database of its own (not the service's: its log would integrate them).
const baselineDbName = `${dbName}_r`
const baselineDatabaseUrl = new URL(adminUrl)
baselineDatabaseUrl.pathname = `/${baselineDbName}`
const plainDbName = `${dbName}_r0`
const plainDatabaseUrl = new URL(adminUrl)
plainDatabaseUrl.pathname = `/${plainDbName}`
const started: Array<Process> = []
try {
  const service = await startProcess("dist/src/main.js", {
    DATABASE_URL: databaseUrl.toString(), NODE_ENV: "production", PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false",
    PV_OPERATOR_TOKEN: operatorToken, PV_EVENT_SIGNING_KEY: pem(), PV_LOG_SIGNING_KEY: pem(), PV_WEBHOOK_SIGNING_KEY: pem(), PV_WORKERS: "1", REDIS_URL: "",
    PV_HUMAN_RATE_LIMIT_PER_MINUTE: "1000000", PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "1000000", PV_LOG_RATE_LIMIT_PER_MINUTE: "100000000"
  }, [], serviceNodeFlags())
  started.push(service)
  const base = service.baseUrl
  const operator = { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" }
  // A chain of 61 events: a full page of 30 after `after=0`, and more behind it.
  for (let i = 0; i <= 60; i++) {
    const reply = await fetch(`${base}/api/v1/determinations/${publicId}`, {
      method: "PUT", headers: operator, body: JSON.stringify(determination(i % 2 === 0 ? "T2" : "T3", `Revision ${i}`))
    })
    if (reply.status !== 200 && reply.status !== 201) throw new Error(`seed: ${reply.status} ${await reply.text()}`)
  }
  const made = await fetch(`${base}/api/v1/api-keys`, {
    method: "POST", headers: operator,
    body: JSON.stringify({
      tenant_id: "bench", name: "bench cpu", scopes: ["trust:read", "receipt:read", "receipt:write", "mcp:call", "actionability:read"],
      rate_limit_per_minute: 1_000_000, daily_quota: 1_000_000_000
    })
  }).then(async (r) => {
    if (r.status !== 201) throw new Error(`key: ${r.status} ${await r.text()}`)
    return r.json()
  }) as { api_key: string }
  const auth = { authorization: `Bearer ${made.api_key}` }
  const json = { ...auth, "content-type": "application/json" }
  const machinePath = `/api/v1/trust/${publicId}/machine`
  const newReceiptBody = JSON.stringify({
    tenant_id: "bench", organization: "Bench Org", principal: "p-[<id>]", subject_public_id: publicId,
    purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"]
  })
  const documentFile = join(dir, "machine.json")
  writeFileSync(documentFile, await fetch(base + machinePath, { headers: auth }).then((r) => r.text()))

  // The log: 61 events and 300 receipts, integrated (a full tile and bundle, partial tiles above and beside them).
  const logReads = ["tile", "bundle", "partial", "checkpoint", "key", "inclusion", "consistency"].some(wanted)
  const checkpointSize = async () => Number((await fetch(`${base}/log/checkpoint`).then((reply) => reply.text())).split("\n")[1])
  /** The log's size once it has stopped growing (integration covers a write within 2 s). */
  const settledSize = async () => {
    for (let size = await checkpointSize();;) {
      await new Promise((resolve) => setTimeout(resolve, 2_500))
      const now = await checkpointSize()
      if (now === size) return size
      size = now
    }
  }
  const partialPath = (size: number) => `/log/tile/0/${String(Math.floor(size / 256)).padStart(3, "0")}.p/${size % 256}`
  let logSize = 0
  const recorded: Record<string, { headers: Record<string, string>; body: string }> = {}
  if (logReads) {
    let left = 300
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (left-- > 0) {
        const reply = await fetch(`${base}/api/v1/reliance-receipts`, {
          method: "POST", headers: json, body: newReceiptBody.replace("[<id>]", `log-${left}`)
        })
        if (reply.status !== 201) throw new Error(`log seed: ${reply.status} ${await reply.text()}`)
      }
    }))
    logSize = await settledSize()
    if (logSize % 256 === 0) throw new Error(`a log of ${logSize} entries has no partial tile`)
    // (s)'s answers: what the service answers, its per-connection headers left out (node:http writes its own).
    for (const path of ["/log/tile/0/000", "/log/tile/entries/000", partialPath(logSize), "/log/checkpoint", "/log/key"]) {
      const reply = await fetch(base + path)
      if (reply.status !== 200) throw new Error(`${path}: ${reply.status}`)
      const headers = Object.fromEntries([...reply.headers].filter(([name]) => !["date", "connection", "keep-alive", "content-length"].includes(name)))
      recorded[path] = { headers, body: Buffer.from(await reply.arrayBuffer()).toString("base64") }
    }
  }
  const answersFile = join(dir, "answers.json")
  writeFileSync(answersFile, JSON.stringify(recorded))

  // The baselines run with node's defaults; BENCH_BASELINE_NODE_FLAGS gives them flags (e.g. the service's own
  // V8 settings: `--max-semi-space-size=8 --no-allocation-site-pretenuring`) to compare the code alone.
  const baselineFlags = (process.env.BENCH_BASELINE_NODE_FLAGS ?? "").split(" ").filter((flag) => flag !== "")
  const a = await startProcess("bench/baselines/nodeHttp.ts", { BENCH_DOCUMENT_FILE: documentFile }, [], baselineFlags)
  started.push(a)
  const b = await startProcess("bench/baselines/bearerApi.ts", { BENCH_DOCUMENT_FILE: documentFile, BENCH_KEY: made.api_key }, [], baselineFlags)
  started.push(b)
  /** A receipt baseline on a database of its own (`row` wanted only), or undefined. */
  const receiptBaseline = async (row: string, file: string, db: string, url: URL) => {
    if (!wanted(row)) return undefined
    await withAdmin(`CREATE DATABASE ${db}`)
    const child = await startProcess(file, {
      BENCH_DOCUMENT_FILE: documentFile, BENCH_PUBLIC_ID: publicId, BENCH_KEY: made.api_key, DATABASE_URL: url.toString()
    }, [], baselineFlags)
    started.push(child)
    return child
  }
  const r = await receiptBaseline("r", "bench/baselines/receiptApi.ts", baselineDbName, baselineDatabaseUrl)
  const r0 = await receiptBaseline("r0", "bench/baselines/receiptHttp.ts", plainDbName, plainDatabaseUrl)
  const sb = logReads ? await startProcess("bench/baselines/staticBytes.ts", { BENCH_ANSWERS_FILE: answersFile }, [], baselineFlags) : undefined
  if (sb !== undefined) started.push(sb)
  type LogRow = "tile" | "bundle" | "partial" | "checkpoint" | "key"
  type Row = "a" | "b" | "r" | "r0" | "machine" | "mcp" | "mcp2026" | "events" | "created" | "replayed" | LogRow | `s-${LogRow}` | "inclusion" | "consistency"
  type Planned = [Row, string, Process, Target | (() => Promise<Target>)]
  /** A log read and its (s) row; the partial tile is the one of the tree as it is when the row runs. */
  const logRows = (row: LogRow, name: string, path: string): Array<Planned> =>
    sb === undefined ? [] : [
      [`s-${row}`, `(s) node:http, ${name}'s bytes and headers`, sb, { url: sb.baseUrl + path }],
      [row, `GET ${name}`, service, row === "partial" ? async () => ({ url: base + partialPath(await settledSize()) }) : { url: base + path }]
    ]
  const proofRows: Array<Planned> = sb === undefined ? [] : [
    ["inclusion", "GET /log/proof/inclusion", service, { url: `${base}/log/proof/inclusion?index=100&tree_size=${logSize}` }],
    ["consistency", "GET /log/proof/consistency", service, { url: `${base}/log/proof/consistency?first=100&second=${logSize}` }]
  ]
  const plan: Array<Planned> = [
    ...logRows("tile", "a full hash tile", "/log/tile/0/000"),
    ...logRows("bundle", "a full entry bundle", "/log/tile/entries/000"),
    ...logRows("partial", "a partial hash tile", partialPath(logSize)),
    ...logRows("checkpoint", "/log/checkpoint", "/log/checkpoint"),
    ...logRows("key", "/log/key", "/log/key"),
    ...proofRows,
    ["a", "(a) node:http", a, { url: a.baseUrl + machinePath }],
    ["b", "(b') HttpApi + bearer + path param", b, { url: b.baseUrl + machinePath, headers: auth }],
    ...(r === undefined ? [] : [["r", "(r') HttpApi + bearer + a new receipt's work", r, {
      url: `${r.baseUrl}/api/v1/reliance-receipts`, method: "POST", headers: json, idReplacement: true, body: newReceiptBody
    }] satisfies Planned]),
    ...(r0 === undefined ? [] : [["r0", "(r0) node:http + a new receipt's work", r0, {
      url: `${r0.baseUrl}/api/v1/reliance-receipts`, method: "POST", headers: json, idReplacement: true, body: newReceiptBody
    }] satisfies Planned]),
    ["machine", "GET /machine", service, { url: base + machinePath, headers: auth }],
    ["mcp", "MCP tools/call resolve_trust (2025-06-18)", service, {
      url: `${base}/api/v1/mcp`, method: "POST", headers: { ...json, accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
      body: mcp2025Body(publicId), idReplacement: true
    }],
    ["mcp2026", "MCP tools/call resolve_trust (2026-07-28)", service, {
      url: `${base}/api/v1/mcp`, method: "POST", headers: { ...json, accept: "application/json, text/event-stream", ...mcp2026Headers },
      body: mcp2026Body(publicId), idReplacement: true
    }],
    ["events", "GET /events, a page of 30", service, { url: `${base}/api/v1/events?public_id=${publicId}&after=0&limit=30`, headers: auth }],
    ["created", "POST receipt, new", service, {
      url: `${base}/api/v1/reliance-receipts`, method: "POST", headers: json, idReplacement: true, body: newReceiptBody
    }],
    ["replayed", "POST receipt, replay", service, {
      url: `${base}/api/v1/reliance-receipts`, method: "POST", headers: json,
      body: JSON.stringify({
        tenant_id: "bench", organization: "Bench Org", principal: "replay", subject_public_id: publicId,
        purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"]
      })
    }]
  ]
  const perRound: Array<Record<Row, number>> = []
  for (let round = 0; round < rounds; round++) {
    const measured = {} as Record<Row, number>
    const shift = round % plan.length
    for (const [key, name, target, options] of [...plan.slice(shift), ...plan.slice(0, shift)]) {
      measured[key] = await measure(rounds > 1 ? `round ${round + 1}: ${name}` : name, target, options, key === "machine" ? undefined : key)
    }
    perRound.push(measured)
  }
  const median = (xs: ReadonlyArray<number>) => {
    const sorted = xs.filter((x) => !Number.isNaN(x)).sort((x, y) => x - y)
    if (sorted.length === 0) return Number.NaN
    const mid = Math.floor(sorted.length / 2)
    return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  }
  // A row not in the plan ((r') when `--only` leaves it out) is NaN, as a row `--only` skips.
  const results = Object.fromEntries(plan.map(([key]) => [key, median(perRound.map((r) => r[key]))])) as Record<Row, number>
  results.r ??= Number.NaN
  results.r0 ??= Number.NaN
  /** The median of the rounds' ratios x ÷ y. */
  const ratioOf = (x: Row, y: Row) => median(perRound.map((r) => r[x] / r[y]))
  const roundsOf = (x: Row, y: Row) => rounds > 1 ? ` (rounds ${perRound.map((r) => (r[x] / r[y]).toFixed(2)).join(", ")})` : ""
  const row = (name: string, micros: number | undefined, ratio: string, target: string, ok?: boolean) =>
    micros === undefined || Number.isNaN(micros) ? undefined : `| ${name} | ${micros.toFixed(1)} | ${ratio} | ${target}${ok === undefined ? "" : ok ? " ✅" : " ❌"} |`
  const lines = [
    `Server CPU per request, ${requests} requests at ${connections} connections per row and round, ${rounds} round(s) (medians), one process each, PostgreSQL; ${new Date().toISOString()}`,
    "",
    "| scenario | CPU µs/request | ratio | target |",
    "|---|---:|---:|---|",
    row("(a) bare node:http, same bytes", results.a, "", ""),
    row("(b') HttpApi + bearer + path param", results.b, Number.isNaN(results.a) ? "" : `${ratioOf("b", "a").toFixed(2)} × (a)${roundsOf("b", "a")}`, ""),
    Number.isNaN(results.b)
      ? row("GET /machine", results.machine, "", "")
      : row("GET /machine", results.machine, `${ratioOf("machine", "b").toFixed(2)} × (b')${roundsOf("machine", "b")}`, "≤ 1.25 × (b')", ratioOf("machine", "b") <= 1.25),
    row("MCP tools/call resolve_trust (2025-06-18)", results.mcp, `${ratioOf("mcp", "machine").toFixed(2)} × GET /machine${roundsOf("mcp", "machine")}`, "≤ 1.25 ×",
      ratioOf("mcp", "machine") <= 1.25),
    row("MCP tools/call resolve_trust (2026-07-28)", results.mcp2026, `${ratioOf("mcp2026", "machine").toFixed(2)} × GET /machine${roundsOf("mcp2026", "machine")}`, "≤ 1.25 ×",
      ratioOf("mcp2026", "machine") <= 1.25),
    row("GET /events, a page of 30", results.events, `${ratioOf("events", "machine").toFixed(2)} × GET /machine${roundsOf("events", "machine")}`, "≤ 1.5 ×",
      ratioOf("events", "machine") <= 1.5),
    row("(r0) node:http + a new receipt's work", results.r0, `${ratioOf("r0", "machine").toFixed(2)} × GET /machine${roundsOf("r0", "machine")}`, ""),
    row("(r') HttpApi + bearer + a new receipt's work", results.r,
      `${ratioOf("r", "machine").toFixed(2)} × GET /machine${roundsOf("r", "machine")}` +
        (Number.isNaN(results.r0) ? "" : `; ${ratioOf("r", "r0").toFixed(2)} × (r0)${roundsOf("r", "r0")}`), ""),
    row("POST receipt, new", results.created,
      `${ratioOf("created", "machine").toFixed(2)} × GET /machine${roundsOf("created", "machine")}` +
        (Number.isNaN(results.r) ? "" : `; ${ratioOf("created", "r").toFixed(2)} × (r')${roundsOf("created", "r")}`),
      "≤ 2.5 ×", ratioOf("created", "machine") <= 2.5),
    row("POST receipt, replay", results.replayed, `${ratioOf("replayed", "machine").toFixed(2)} × GET /machine${roundsOf("replayed", "machine")}`, "≤ 1.2 ×",
      ratioOf("replayed", "machine") <= 1.2),
    ...([["tile", "a full hash tile", 1.5], ["bundle", "a full entry bundle", 1.5], ["partial", "a partial hash tile", 2], ["checkpoint", "/log/checkpoint", 2], ["key", "/log/key", 2]] as const)
      .flatMap(([key, name, target]) => [
        row(`(s) node:http, ${name}'s bytes and headers`, results[`s-${key}`], "", ""),
        row(`GET ${name}`, results[key], `${ratioOf(key, `s-${key}`).toFixed(2)} × (s)${roundsOf(key, `s-${key}`)}`, `≤ ${target} × (s)`, ratioOf(key, `s-${key}`) <= target)
      ]),
    ...(["inclusion", "consistency"] as const).map((key) =>
      row(`GET /log/proof/${key}`, results[key], `${ratioOf(key, "machine").toFixed(2)} × GET /machine${roundsOf(key, "machine")}`, "≤ 1.0 ×", ratioOf(key, "machine") <= 1.0))
  ]
  console.log(lines.filter((line) => line !== undefined).join("\n"))
} finally {
  for (const process of started.reverse()) await process.stop()
  // Each drop on its own, so a failed one neither keeps the other nor hides the run's own error.
  for (const name of [dbName, baselineDbName, plainDbName]) {
    await withAdmin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch((error) => console.error(`could not drop ${name}:`, error))
  }
  rmSync(dir, { recursive: true, force: true })
}
