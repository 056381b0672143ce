// `npm run bench:overload [-- --seconds 10 --connections 32 --fixed 64 --refusals 20000 --refusal-only]`: the overload scenario of `npm run bench` on
// its own, in about a minute. One service process on a fresh PostgreSQL database (DATABASE_URL's server, default
// postgres://postgres@127.0.0.1:5432/postgres; dropped afterwards): GET /machine at `connections` (unloaded), then at
// 4 × `connections`, with the adaptive admission limit, and again with PV_MAX_IN_FLIGHT pinned to `--fixed` for
// comparison. Reports the admitted requests' p99 against the unloaded p99 (target ≤ 4 ×) and the admitted throughput
// against the unloaded throughput (target ≥ 0.9 ×). Last, what one refusal costs the server: CPU µs per 503
// `overloaded` (utime + stime from /proc over `--refusals` refused requests, one process admitting one request).
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { parseArgs } from "node:util"
import { drive, type DriveResult } from "./faultLoad.js"
import { connect } from "node:net"
import { adminQuery, benchAdminUrl, cpuSeconds, load, serviceNodeFlags, startProcess } from "./lib.js"

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "10" },
    connections: { type: "string", default: "32" },
    fixed: { type: "string", default: "64" },
    refusals: { type: "string", default: "20000" },
    /** Only the cost of a refusal (about 30 s). */
    "refusal-only": { type: "boolean", default: false }
  }
})
const seconds = Number(values.seconds)
const connections = Number(values.connections)
const operatorToken = `bench_${randomBytes(24).toString("hex")}`
const pem = () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const adminUrl = benchAdminUrl
const publicId = "DET-V1-BENCH-OVERLOAD-0001"

const withAdmin = adminQuery

const run = async (label: string, env: Record<string, string>) => {
  const dbName = `pv_bench_overload_${Date.now()}`
  await withAdmin(`CREATE DATABASE ${dbName}`)
  const url = new URL(adminUrl)
  url.pathname = `/${dbName}`
  const service = await startProcess("dist/src/main.js", {
    DATABASE_URL: url.toString(), NODE_ENV: "production", PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false",
    PV_OPERATOR_TOKEN: operatorToken, PV_EVENT_SIGNING_KEY: pem(), PV_LOG_SIGNING_KEY: pem(), PV_WEBHOOK_SIGNING_KEY: pem(), PV_WORKERS: "1", REDIS_URL: "", ...env
  }, [], serviceNodeFlags())
  try {
    const operator = { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" }
    const asOf = Date.now() - 86_400_000
    const body = {
      subject: { subject_id: "sub_bench", physical_subject_id: "phys_bench", identity_state: "VERIFIED" },
      tier: "T2", eligible: true, why_this_tier: ["Registry identity verified"], why_not_higher: ["Second audit missing"],
      claims: [{ claim_id: "c1", type: "legal_name", value: "Bench Co", scope: "identity" }],
      evidence: [{ evidence_id: "ev1", kind: "registry_extract", digest: "a".repeat(64), collected_at: new Date(asOf).toISOString(), source: "registry" }],
      allowed_claims: ["identity"], limitations: ["Entity only"], prohibited_inferences: ["credential_issued"], lifecycle_state: "NOT_ISSUED",
      as_of: new Date(asOf).toISOString(), valid_until: new Date(asOf + 100 * 86_400_000).toISOString(), engine: { name: "bench", version: "1" }
    }
    const put = await fetch(`${service.baseUrl}/api/v1/determinations/${publicId}`, { method: "PUT", headers: operator, body: JSON.stringify(body) })
    if (put.status !== 201) throw new Error(`seed: ${put.status} ${await put.text()}`)
    const made = await fetch(`${service.baseUrl}/api/v1/api-keys`, {
      method: "POST", headers: operator,
      body: JSON.stringify({ tenant_id: "bench", name: "bench", scopes: ["trust:read"], rate_limit_per_minute: 1_000_000, daily_quota: 1_000_000_000 })
    }).then((r) => r.json()) as { api_key: string }
    const target = { url: `${service.baseUrl}/api/v1/trust/${publicId}/machine`, headers: { authorization: `Bearer ${made.api_key}` } }
    await drive({ ...target, connections, durationMs: 3_000 })
    const unloaded = await drive({ ...target, connections, durationMs: seconds * 1000 })
    const overloaded = await drive({ ...target, connections: 4 * connections, durationMs: seconds * 1000 })
    return { label, unloaded, overloaded }
  } finally {
    await service.stop()
    await withAdmin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  }
}

const row = ({ label, unloaded, overloaded }: { label: string; unloaded: DriveResult; overloaded: DriveResult }) => {
  const p99Ratio = overloaded.admittedP99 / unloaded.admittedP99
  const throughputRatio = overloaded.admittedPerSecond / unloaded.admittedPerSecond
  const refused = overloaded.byStatus["503"] ?? 0
  return `| ${label} | ${unloaded.admittedPerSecond.toFixed(0)} | ${unloaded.admittedP99.toFixed(1)} | ` +
    `${overloaded.admittedPerSecond.toFixed(0)} | ${overloaded.admittedP99.toFixed(1)} | ${p99Ratio.toFixed(2)} × ${p99Ratio <= 4 ? "✅" : "❌"} | ` +
    `${throughputRatio.toFixed(2)} × ${throughputRatio >= 0.9 ? "✅" : "❌"} | ${((100 * refused) / overloaded.sent).toFixed(1)} % (p99 ${overloaded.refusalP99.toFixed(1)} ms) | ${overloaded.lost} |`
}

/**
 * The server's CPU per 503 `overloaded`: PV_MAX_IN_FLIGHT=1, the one slot held by an operator PUT whose body
 * never comes (admitted, it waits for the body), and `count` GET /machine refused meanwhile at 16 connections.
 */
const refusalCost = async (count: number) => {
  const dbName = `pv_bench_refusal_${Date.now()}`
  await withAdmin(`CREATE DATABASE ${dbName}`)
  const url = new URL(adminUrl)
  url.pathname = `/${dbName}`
  const service = await startProcess("dist/src/main.js", {
    DATABASE_URL: url.toString(), NODE_ENV: "production", PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false",
    PV_OPERATOR_TOKEN: operatorToken, PV_EVENT_SIGNING_KEY: pem(), PV_LOG_SIGNING_KEY: pem(), PV_WEBHOOK_SIGNING_KEY: pem(), PV_WORKERS: "1", REDIS_URL: "",
    PV_MAX_IN_FLIGHT: "1", PV_REQUEST_TIMEOUT_MS: "600000"
  }, [], serviceNodeFlags())
  const { hostname, port } = new URL(service.baseUrl)
  const held = connect({ host: hostname, port: Number(port) })
  try {
    await new Promise<void>((resolve, reject) => (held.once("connect", resolve), held.once("error", reject)))
    held.write(`PUT /api/v1/determinations/${publicId} HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${operatorToken}\r\n` +
      "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"subject\":")
    const target = `${service.baseUrl}/api/v1/trust/${publicId}/machine`
    for (let tries = 0; (await fetch(target)).status !== 503; tries++) {
      if (tries > 100) throw new Error("the held request did not take the one slot")
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await load({ url: target, connections: 16, seconds: 0, amount: Math.max(1_000, Math.floor(count / 10)) })
    const pid = service.child.pid!
    const before = cpuSeconds(pid)
    const result = await load({ url: target, connections: 16, seconds: 0, amount: count })
    const used = cpuSeconds(pid) - before
    if ((result.statusCodes["503"] ?? 0) !== result.total) throw new Error(`not every request was refused: ${JSON.stringify(result.statusCodes)}`)
    return { refused: result.total, microseconds: (used * 1e6) / result.total, perSecond: result.requestsPerSecond }
  } finally {
    held.destroy()
    await service.stop()
    await withAdmin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  }
}

if (!values["refusal-only"]) {
  const results = [await run("adaptive (default)", {}), await run(`fixed PV_MAX_IN_FLIGHT=${values.fixed}`, { PV_MAX_IN_FLIGHT: values.fixed! })]
  console.log(`\nGET /machine, one process, PostgreSQL; unloaded ${connections} connections, overloaded ${4 * connections}; ${seconds} s each\n`)
  console.log("| admission | unloaded req/s | unloaded p99 ms | 4× admitted req/s | 4× admitted p99 ms | p99 ratio (≤ 4 ×) | throughput ratio (≥ 0.9 ×) | 503 overloaded | lost |")
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
  for (const result of results) console.log(row(result))
}
const refusal = await refusalCost(Number(values.refusals))
console.log(`\n503 overloaded, one process (PV_MAX_IN_FLIGHT=1, its slot held): ${refusal.refused} refusals at ${refusal.perSecond.toFixed(0)}/s, ` +
  `server CPU ${refusal.microseconds.toFixed(1)} µs per refusal`)
