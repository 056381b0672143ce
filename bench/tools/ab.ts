// `node --import tsx bench/tools/ab.ts <dirA> <dirB> [scenarios] [rounds] [requests]`: server CPU per request of two
// builds of the service side by side (each directory a checkout with `npm run build` done, e.g. a git worktree
// of the commit before a change and this one), each on its own PostgreSQL database, measured in alternating
// rounds (A B, B A, A B, …) so a noisy neighbour weighs on both alike. Scenarios (default machine): machine,
// mcp, mcp2026, replay, created, events, receipt, key, checkpoint (the log fast path). Prints each round's CPU µs
// per request, the medians and B/A over all rounds. AB_NODE_FLAGS_A / AB_NODE_FLAGS_B add node flags to one side (the same dir twice then compares
// V8 settings). On a shared machine this is the before/after to trust; `npm run bench:cpu` gives the targets.
import { cpuSeconds, load, type ScenarioService, startScenarioService } from "../lib.js"

interface Setup {
  readonly label: "A" | "B"
  readonly run: ScenarioService
}
const [dirA, dirB, scen = "machine", roundsS = "6", nS = "5000"] = process.argv.slice(2)
if (dirA === undefined || dirB === undefined) throw new Error("usage: bench/tools/ab.ts <dirA> <dirB> [scenarios] [rounds] [requests]")
const scenarios = scen.split(","), rounds = Number(roundsS), n = Number(nS)
const setups: Array<Setup> = []
try {
  for (const [label, dir] of [["A", dirA], ["B", dirB]] as const) {
    // For `events`: a chain of 61 events (as bench/cpu.ts), so `after=0&limit=30` is a full page.
    const flags = (process.env[`AB_NODE_FLAGS_${label}`] ?? "").split(" ").filter((flag) => flag !== "")
    const run = await startScenarioService(dir, flags, { databasePrefix: `pv_ab_${label.toLowerCase()}`, chain: scenarios.includes("events") })
    setups.push({ label, run })
  }
  const results: Record<string, Record<string, number[]>> = {}
  for (const s of scenarios) {
    results[s] = { A: [], B: [] }
    for (const setup of setups) await load({ ...setup.run.scenarios[s]!, connections: 16, seconds: 0, amount: 5000 })
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? setups : [...setups].reverse()
      for (const setup of order) {
        const pid = setup.run.service.child.pid!
        const before = cpuSeconds(pid)
        const res = await load({ ...setup.run.scenarios[s]!, connections: 16, seconds: 0, amount: n })
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
  for (const s of setups) await s.run.close()
}
