// `node --import tsx bench/profileWitnessed.ts [--witnesses] [--amount N] [--entry <another build>/src/main.js]`: the COMPILED
// server (`npm run build` first), one process on a scratch PostgreSQL database, under new receipts (as W2 loads it),
// profiled with --cpu-prof; with `--witnesses`, two local witnesses (quorum 2) are configured. Prints the service's
// CPU per receipt, the database transactions per receipt and the profile summary, and keeps the profile in
// $TMPDIR/pv-profw-<with|without>.cpuprofile.
// `--rate R --seconds S` instead sends R new receipts a second (a checkpoint per integration round) for S seconds,
// unprofiled, and prints the service's CPU per second: with and without witnesses, the difference is the
// witnessing work itself, measured apart from the machine's noise at full load.
import { createPrivateKey, generateKeyPairSync, randomBytes } from "node:crypto"
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { privateKeyFromSeed } from "../src/events/Signer.js"
import { verifierKeyOfSigner } from "../src/log/Note.js"
import { adminQuery, benchAdminUrl, databaseCommits, cpuSeconds, load, putProfileDetermination, serviceNodeFlags, startProcess } from "./lib.js"
import { summarise } from "./profileSummary.js"
import { startWitness } from "./witnessRows.js"

const { values } = parseArgs({ options: {
  witnesses: { type: "boolean", default: false }, amount: { type: "string", default: "20000" }, entry: { type: "string", default: "dist/src/main.js" },
  rate: { type: "string" }, seconds: { type: "string", default: "20" }
}  })
const label = values.witnesses ? "with" : "without"
const dbName = `pv_profw_${Date.now()}`
const profileDir = mkdtempSync(join(tmpdir(), "pv-profw-"))
const operatorToken = `p_${randomBytes(24).toString("hex")}`
const pem = () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const seeded = (seed: number) => privateKeyFromSeed(Buffer.alloc(32, seed)).export({ format: "pem", type: "pkcs8" }).toString()
const publicId = "DET-V1-PROF-0001"
const logSigningKey = seeded(77)

await adminQuery(`CREATE DATABASE ${dbName}`)
const url = new URL(benchAdminUrl)
url.pathname = `/${dbName}`
const witnesses = values.witnesses
  ? await Promise.all(["w1", "w2"].map((name, i) =>
    startWitness({
      PV_DATA_DIR: join(profileDir, `witness-${name}`), PV_WITNESS_NAME: `bench.example/${name}`,
      PV_WITNESS_LOGS: verifierKeyOfSigner("localhost/pv-log", createPrivateKey(logSigningKey)), PV_WITNESS_SIGNING_KEY: seeded(210 + i)
    })))
  : []
try {
  const keyOf = async (baseUrl: string) => ((await (await fetch(`${baseUrl}/witness/key`)).json()) as { verifier_key: string }).verifier_key
  const configured = (await Promise.all(witnesses.map(async (w) => `${w.baseUrl}=${await keyOf(w.baseUrl)}`))).join(",")
  const service = await startProcess(values.entry, {
    DATABASE_URL: url.toString(), NODE_ENV: "production", PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false",
    PV_OPERATOR_TOKEN: operatorToken, PV_EVENT_SIGNING_KEY: pem(), PV_LOG_SIGNING_KEY: logSigningKey, PV_WEBHOOK_SIGNING_KEY: pem(), PV_WORKERS: "1", REDIS_URL: "",
    PV_HUMAN_RATE_LIMIT_PER_MINUTE: "1000000", PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "1000000",
    ...(values.witnesses ? { PV_LOG_WITNESSES: configured, PV_LOG_WITNESS_QUORUM: "2" } : {})
  }, [], [...serviceNodeFlags(), ...(values.rate === undefined ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [])])
  const base = service.baseUrl
  const operator = { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" }
  await putProfileDetermination(base, operator, publicId)
  const made = await fetch(`${base}/api/v1/api-keys`, {
    method: "POST", headers: operator, body: JSON.stringify({
      tenant_id: "bench", name: "p", scopes: ["trust:read", "receipt:read", "receipt:write"], rate_limit_per_minute: 1_000_000, daily_quota: 1_000_000_000
    })
  }).then((r) => r.json()) as { api_key: string }
  const headers = { authorization: `Bearer ${made.api_key}`, "content-type": "application/json" }
  const commits = () => databaseCommits(dbName)
  const amount = Number(values.amount)
  const receipt = {
    url: `${base}/api/v1/reliance-receipts`, method: "POST", headers, idReplacement: true, body: JSON.stringify({
      tenant_id: "bench", organization: "Bench Org", principal: "p-[<id>]", subject_public_id: publicId,
      purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"]
    })
  }
  await load({ ...receipt, connections: 16, seconds: 0, amount: 2_000 })
  if (values.rate !== undefined) {
    const rate = Number(values.rate)
    const seconds = Number(values.seconds)
    const size = async () => Number((await (await fetch(`${base}/log/checkpoint`)).text()).split("\n")[1])
    const size0 = values.witnesses ? 0 : await size()
    const cpu0 = cpuSeconds(service.child.pid!)
    const started = performance.now()
    let sent = 0
    const pending: Array<Promise<number>> = []
    while (performance.now() - started < seconds * 1000) {
      const due = Math.floor(((performance.now() - started) / 1000) * rate)
      for (; sent < due; sent++) {
        pending.push(fetch(receipt.url, { method: "POST", headers, body: receipt.body.replace("[<id>]", `r${sent}-${Date.now()}`) }).then(async (r) => (await r.arrayBuffer(), r.status)))
      }
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    const statuses = await Promise.all(pending)
    const elapsed = (performance.now() - started) / 1000
    const cpu = cpuSeconds(service.child.pid!) - cpu0
    console.log(`${label} witnesses, ${values.entry}: ${sent} receipts at ${rate}/s over ${elapsed.toFixed(1)} s (${statuses.filter((s) => s !== 201).length} not 201); ` +
      `service CPU ${(1000 * cpu / elapsed).toFixed(1)} ms per second, ${(1e6 * cpu / sent).toFixed(0)} µs per receipt` +
      (values.witnesses ? "" : `; ${(await size()) - size0} entries logged`))
    await service.stop()
  } else {
  const before = await commits()
  const cpu0 = cpuSeconds(service.child.pid!)
  const started = performance.now()
  const result = await load({ ...receipt, connections: 16, seconds: 0, amount })
  const elapsed = (performance.now() - started) / 1000
  const cpu = cpuSeconds(service.child.pid!) - cpu0
  const transactions = (await commits()) - before
  const status = values.witnesses ? await (await fetch(`${base}/log/checkpoint`)).text() : ""
  console.log(`${label} witnesses: ${amount} receipts in ${elapsed.toFixed(1)} s (${(amount / elapsed).toFixed(0)}/s, non-2xx ${result.non2xx}); ` +
    `service CPU ${(1e6 * cpu / amount).toFixed(0)} µs/receipt; ${(transactions / amount).toFixed(3)} database transactions/receipt (${(transactions / elapsed).toFixed(0)}/s)`)
  if (values.witnesses) console.log(status.split("\n").slice(0, 2).join(" ") + ` … ${status.split("\n").filter((l) => l.startsWith("—")).length} signature lines`)
  await service.stop()
  const file = readdirSync(profileDir).find((f) => f.endsWith(".cpuprofile"))
  if (file) copyFileSync(join(profileDir, file), join(tmpdir(), `pv-profw-${label}.cpuprofile`))
  console.log(file ? summarise(join(profileDir, file)) : "no profile")
  }
} finally {
  await Promise.all(witnesses.map((w) => w.stop()))
  await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  rmSync(profileDir, { recursive: true, force: true })
}
