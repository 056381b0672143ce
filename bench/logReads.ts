// `npm run bench:log`: the log's public reads at 32 connections in a log of a million entries (issue 38's p99 rows),
// in a few minutes: the service as `npm bench` runs it (compiled, `--workers` processes, default 2) on a scratch
// PostgreSQL database (DATABASE_URL's server; dropped afterwards), the log bulk-appended to `--entries` (default
// 1,000,000) and integrated, then each read under closed-loop load for `--seconds` (default 10) at `--connections`
// (default 32): an inclusion proof and a full hash tile as `npm run bench` asks for them, a consistency proof, a
// partial tile and the checkpoint. Target: p99 ≤ 10 ms for tiles and proofs.
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { parseArgs } from "node:util"
import { encodeTileIndex } from "../src/log/Tiles.js"
import { adminQuery, benchAdminUrl, benchServiceEnv, load, serviceNodeFlags, startProcess } from "./lib.js"
import { bulkAppend, treeSize } from "./logData.js"

const { values } = parseArgs({
  options: {
    entries: { type: "string", default: "1000000" }, seconds: { type: "string", default: "10" },
    connections: { type: "string", default: "32" }, workers: { type: "string", default: "2" }
  },
  strict: false
})
const log = (line: string) => console.error(`[bench:log] ${line}`)
const pem = () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const dbName = `pv_bench_log_${Date.now()}`
const databaseUrl = new URL(benchAdminUrl)
databaseUrl.pathname = `/${dbName}`
await adminQuery(`CREATE DATABASE ${dbName}`)
try {
  const service = await startProcess("dist/src/main.js", {
    ...benchServiceEnv({ operatorToken: `bench_${randomBytes(24).toString("hex")}`, signingKey: pem(), logSigningKey: pem() }),
    DATABASE_URL: databaseUrl.toString(), PV_WORKERS: String(values.workers), PV_LOG_RATE_LIMIT_PER_MINUTE: "100000000"
  }, [], serviceNodeFlags())
  try {
    const base = service.baseUrl
    for (let i = 0; i < 100 && Number.isNaN(await treeSize(base).catch(() => Number.NaN)); i++) await new Promise((r) => setTimeout(r, 100))
    const appended = await bulkAppend(databaseUrl.toString(), base, Number(values.entries))
    log(`integrated ${appended.entries} entries in ${appended.seconds.toFixed(1)} s (${appended.perSecond.toFixed(0)}/s)`)
    const size = await treeSize(base)
    const half = Math.floor(size / 2)
    const rows: Array<[string, string]> = [
      ["GET /log/proof/inclusion (index size/2, tree_size size)", `${base}/api/v1/log/proof/inclusion?index=${half}&tree_size=${size}`],
      ["GET /log/tile (full hash tile)", `${base}/api/v1/log/tile/0/${encodeTileIndex(Math.floor(size / 512))}`],
      ["GET /log/proof/consistency (size/2 → size)", `${base}/log/proof/consistency?first=${half}&second=${size}`],
      ["GET /log/tile (partial hash tile, level 1)", `${base}/log/tile/1/${encodeTileIndex(Math.floor(size / 65536))}.p/${Math.floor(size / 256) % 256}`],
      ["GET /log/checkpoint", `${base}/log/checkpoint`]
    ]
    const lines = [
      `The log's reads in a log of ${size} entries, ${values.connections} connections, ${values.seconds} s each, ${values.workers} service processes, PostgreSQL; ${new Date().toISOString()}`,
      "", "| read | req/s | p50 / p99 ms | target |", "|---|---:|---:|---|"
    ]
    const connections = Number(values.connections)
    for (const [name, url] of rows) {
      await load({ url, connections, seconds: 2 })
      const result = await load({ url, connections, seconds: Number(values.seconds) })
      if (result.non2xx > 0 || result.errors > 0) throw new Error(`${name}: ${JSON.stringify(result.statusCodes)}, ${result.errors} errors`)
      log(`${name}: ${result.requestsPerSecond.toFixed(0)} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms`)
      const target = name.includes("checkpoint") ? "" : `p99 ≤ 10 ms ${result.p99 <= 10 ? "✅" : "❌"}`
      lines.push(`| ${name} | ${result.requestsPerSecond.toFixed(0)} | ${result.p50} / ${result.p99} | ${target} |`)
    }
    console.log(lines.join("\n"))
  } finally {
    await service.stop()
  }
} finally {
  await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
}
