// `node --import tsx bench/profileCompiled.ts [machine|mcp|mcp2026|replay|receipt|events]`: like bench/profile.ts, but the server is the
// COMPILED one (dist/src/main.js, `npm run build` first), so tsx's loader does not show up in the profile.
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { databaseCommits, load, root, type ScenarioService, startScenarioService } from "./lib.js"
import { summarise } from "./profileSummary.js"

const scenario = process.argv[2] ?? "machine"
const profileDir = mkdtempSync(join(tmpdir(), "pv-profc-"))

let running: ScenarioService | undefined
try {
  running = await startScenarioService(root, ["--cpu-prof", `--cpu-prof-dir=${profileDir}`], {
    databasePrefix: "pv_profc",
    chain: scenario === "events"
  })
  const { service, scenarios, dbName } = running
  const options = { ...scenarios, receipt: scenarios.created }[scenario]
  if (options === undefined) throw new Error(`unknown scenario ${scenario}`)
  // How many statements the load itself cost the database (transactions committed in the scratch database).
  const commits = () => databaseCommits(dbName)
  const before = await commits()
  const loadStarted = performance.now()
  await load({ ...options, connections: 16, seconds: 0, amount: 30_000 })
  await new Promise((done) => setTimeout(done, 600))
  console.log(`30,000 requests in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s; ${(await commits()) - before} database transactions meanwhile`)
  await service.stop()
  if (process.env.PV_TRACE_CTX) console.log(service.output().split("\n").filter((l) => l.includes("CTX")).slice(0, 3).join("\n"))
  if (process.env.PV_TRACE_SQL) console.log([...service.output().matchAll(/^SQL (.*)$/gm)].map((m) => m[1]).slice(-400).join("\n"))
  const file = readdirSync(profileDir).find((f) => f.endsWith(".cpuprofile"))
  if (file) copyFileSync(join(profileDir, file), join(tmpdir(), `pv-profc-${scenario}.cpuprofile`))
  console.log(file ? summarise(join(profileDir, file)) : "no profile")
} finally {
  await running?.close()
  rmSync(profileDir, { recursive: true, force: true })
}
