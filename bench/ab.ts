// `node --import tsx bench/ab.ts <dirA> <dirB> [scenarios] [rounds] [requests]`: server CPU per request of two
// builds of the service side by side (each directory a checkout with `npm run build` done, e.g. a git worktree
// of the commit before a change and this one), each on its own PostgreSQL database, measured in alternating
// rounds (A B, B A, A B, …) so a noisy neighbour weighs on both alike. Scenarios (default machine): machine,
// mcp, mcp2026, replay, created, events. Prints each round's CPU µs per request, the medians and B/A over
// all rounds. On a shared machine this is the before/after to trust; `npm run bench:cpu` gives the targets.
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { join } from "node:path"
import { adminQuery, benchAdminUrl, cpuSeconds, load, type LoadOptions, type Process, putProfileDetermination, scenarioRequests, serviceNodeFlags, startProcess } from "./lib.js"

interface Setup {
  readonly label: "A" | "B"
  readonly proc: Process
  readonly options: Record<string, Omit<LoadOptions, "connections" | "seconds">>
  readonly dbName: string
}
const [dirA, dirB, scen = "machine", roundsS = "6", nS = "5000"] = process.argv.slice(2)
if (dirA === undefined || dirB === undefined) throw new Error("usage: bench/ab.ts <dirA> <dirB> [scenarios] [rounds] [requests]")
const scenarios = scen.split(","), rounds = Number(roundsS), n = Number(nS)
const pem = () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const publicId = "DET-V1-PROF-0001"
const stamp = Date.now()
const setups: Array<Setup> = []
try {
  for (const [label, dir] of [["A", dirA], ["B", dirB]] as const) {
    const dbName = `pv_ab_${label.toLowerCase()}_${stamp}`
    await adminQuery(`CREATE DATABASE ${dbName}`)
    const url = new URL(benchAdminUrl); url.pathname = `/${dbName}`
    const token = `p_${randomBytes(24).toString("hex")}`
    const proc = await startProcess(join(dir, "dist/src/main.js"), {
      DATABASE_URL: url.toString(), NODE_ENV: "production", PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false",
      PV_OPERATOR_TOKEN: token, PV_EVENT_SIGNING_KEY: pem(), PV_LOG_SIGNING_KEY: pem(), PV_WORKERS: "1", REDIS_URL: "",
      PV_HUMAN_RATE_LIMIT_PER_MINUTE: "1000000", PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "1000000"
    }, [], serviceNodeFlags())
    const operator = { authorization: `Bearer ${token}`, "content-type": "application/json" }
    await putProfileDetermination(proc.baseUrl, operator, publicId)
    // For `events`: a chain of 61 events (as bench/cpu.ts), so `after=0&limit=30` is a full page.
    if (scenarios.includes("events")) for (let i = 1; i <= 60; i++) await putProfileDetermination(proc.baseUrl, operator, publicId, `Revision ${i}`)
    const options: Setup["options"] = await scenarioRequests(proc.baseUrl, operator, publicId)
    setups.push({ label, proc, options, dbName })
  }
  const results: Record<string, Record<string, number[]>> = {}
  for (const s of scenarios) {
    results[s] = { A: [], B: [] }
    for (const setup of setups) await load({ ...setup.options[s]!, connections: 16, seconds: 0, amount: 5000 })
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? setups : [...setups].reverse()
      for (const setup of order) {
        const pid = setup.proc.child.pid!
        const before = cpuSeconds(pid)
        const res = await load({ ...setup.options[s]!, connections: 16, seconds: 0, amount: n })
        const used = cpuSeconds(pid) - before
        const bad = res.total - (res.statusCodes["200"] ?? 0) - (res.statusCodes["201"] ?? 0)
        if (bad > 0) throw new Error(`${s} ${setup.label}: ${JSON.stringify(res.statusCodes)}`)
        results[s]![setup.label]!.push(used * 1e6 / res.total)
      }
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)
    const A = results[s]!.A!, B = results[s]!.B!
    console.log(`${s}: A ${A.map((x) => x.toFixed(0)).join(" ")} | B ${B.map((x) => x.toFixed(0)).join(" ")} | median A ${med(A).toFixed(1)} B ${med(B).toFixed(1)} | B/A ${(sum(B) / sum(A)).toFixed(3)}`)
  }
} finally {
  for (const s of setups) await s.proc.stop()
  for (const s of setups) await adminQuery(`DROP DATABASE IF EXISTS ${s.dbName} WITH (FORCE)`)
}
