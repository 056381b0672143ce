// `node --import tsx bench/profileCompiled.ts [machine|mcp|mcp2026|replay|receipt|events]`: like bench/profile.ts, but the server is the
// COMPILED one (dist/src/main.js, `npm run build` first), so tsx's loader does not show up in the profile.
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { adminQuery, benchAdminUrl, databaseCommits, load, putProfileDetermination, scenarioRequests, serviceNodeFlags, startProcess } from "./lib.js"
import { summarise } from "./profileSummary.js"

const scenario = process.argv[2] ?? "machine"
const dbName = `pv_profc_${Date.now()}`
const profileDir = mkdtempSync(join(tmpdir(), "pv-profc-"))
const operatorToken = `p_${randomBytes(24).toString("hex")}`
const pem = () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const publicId = "DET-V1-PROF-0001"


await adminQuery(`CREATE DATABASE ${dbName}`)
const url = new URL(benchAdminUrl)
url.pathname = `/${dbName}`
try {
  const service = await startProcess("dist/src/main.js", {
    DATABASE_URL: url.toString(), NODE_ENV: "production", PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false",
    PV_OPERATOR_TOKEN: operatorToken, PV_EVENT_SIGNING_KEY: pem(), PV_LOG_SIGNING_KEY: pem(), PV_WORKERS: "1", REDIS_URL: "",
    PV_HUMAN_RATE_LIMIT_PER_MINUTE: "1000000", PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "1000000"
  }, [], [...serviceNodeFlags(), "--cpu-prof", `--cpu-prof-dir=${profileDir}`])
  const base = service.baseUrl
  const operator = { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" }
  await putProfileDetermination(base, operator, publicId)
  // For `events`: a chain of 61 events (as bench/cpu.ts), so `after=0&limit=30` is a full page.
  if (scenario === "events") for (let i = 1; i <= 60; i++) await putProfileDetermination(base, operator, publicId, `Revision ${i}`)
  const requests = await scenarioRequests(base, operator, publicId)
  const options = { ...requests, receipt: requests.created }[scenario]
  if (options === undefined) throw new Error(`unknown scenario ${scenario}`)
  // How many statements the load itself cost the database (transactions committed in the scratch database).
  const commits = () => databaseCommits(dbName)
  const before = await commits()
  const started = performance.now()
  await load({ ...options, connections: 16, seconds: 0, amount: 30_000 })
  await new Promise((done) => setTimeout(done, 600))
  console.log(`30,000 requests in ${((performance.now() - started) / 1000).toFixed(1)} s; ${(await commits()) - before} database transactions meanwhile`)
  await service.stop()
  if (process.env.PV_TRACE_CTX) console.log(service.output().split("\n").filter((l) => l.includes("CTX")).slice(0, 3).join("\n"))
  if (process.env.PV_TRACE_SQL) console.log([...service.output().matchAll(/^SQL (.*)$/gm)].map((m) => m[1]).slice(-400).join("\n"))
  const file = readdirSync(profileDir).find((f) => f.endsWith(".cpuprofile"))
  if (file) copyFileSync(join(profileDir, file), join(tmpdir(), `pv-profc-${scenario}.cpuprofile`))
  console.log(file ? summarise(join(profileDir, file)) : "no profile")
} finally {
  await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  rmSync(profileDir, { recursive: true, force: true })
}
