// `npm run bench:tool -- <tool> [arguments]`: the one entry point of the profilers behind the benchmarks. They
// answer "why does this row cost what it costs" rather than measure a target; bench/README.md says what each prints.
// Without a tool name (or an unknown one) it lists them.
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

const tools: Record<string, string> = {
  ab: "<dirA> <dirB> [scenarios] [rounds] [requests]: two built checkouts in alternating rounds, server CPU per request and B/A",
  allocProfile: "[dir] [scenario] [requests] [--survivors]: bytes a request allocates, by allocation site",
  gcTrace: "[dir] [scenario] [requests] [rounds] [connections]: promotion, collections and compilations per request",
  perfProfile: "[dir] [scenario|bprime|rprime] [requests]: where a request's CPU goes as Linux perf sees it (every thread)",
  receiptParts: "[--receipts N] [--inflight 1,4,16] [--rounds R]: a new receipt's pure work, and its write through the service's group commit against `pg` alone",
  promotion: "[--statements N] [--size S] [--fibers F] [--variants a,b]: bytes young collections promote per statement, by how its parameter is held",
  profile: "<machine|mcp|mcp2026|receipts|events|tile|inclusion>: one scenario under --cpu-prof, hottest functions and packages",
  spanCost: "[calls] [rounds]: the CPU one Effect.fn span adds to a service call (plain and wrapped, alternating)",
  witness: "[--seconds S] [--postgres] [--profile]: row W1 (add-checkpoint answers per second of one witness) alone",
  idleProbe: ": the compiled server's CPU and database transactions per second while idle",
  mcpServerProbe: ": effect's own McpServer asked the requests our MCP tests send (docs/EFFECT4-PORT.md)"
}

const [name, ...args] = process.argv.slice(2)
if (name === undefined || !(name in tools)) {
  console.log(["usage: npm run bench:tool -- <tool> [arguments]", "", ...Object.entries(tools).map(([tool, text]) => `  ${tool} ${text}`)].join("\n"))
  process.exit(name === undefined ? 0 : 2)
}
const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(new URL(`./${name}.ts`, import.meta.url)), ...args], { stdio: "inherit" })
child.on("exit", (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)))
