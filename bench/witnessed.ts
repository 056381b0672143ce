// `node --import tsx bench/witnessed.ts [--seconds 10] [--connections 16]`: new receipts per second with no
// witnesses and with two local witnesses (quorum 2), back to back on fresh embedded services; and, under
// the witnessed load, the time from a receipt's acknowledgment to the first witnessed checkpoint covering
// it (its proof bundle answering 200), sampled every 100 ms.
import { createPrivateKey, randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { privateKeyFromSeed } from "../src/events/Signer.js"
import { verifierKeyOfSigner } from "../src/log/Note.js"
import { load, type Process, serviceNodeFlags, startProcess } from "./lib.js"

const { values } = parseArgs({ options: { seconds: { type: "string", default: "10" }, connections: { type: "string", default: "16" } } })
const seconds = Number(values.seconds)
const connections = Number(values.connections)
const log = (line: string) => console.error(`[bench:witnessed] ${line}`)
const dataDir = mkdtempSync(join(tmpdir(), "pv-bench-witnessed-"))
const operatorToken = `bench_${randomBytes(24).toString("hex")}`
const pem = (seed: number) => privateKeyFromSeed(Buffer.alloc(32, seed)).export({ format: "pem", type: "pkcs8" }).toString()
const logSigningKey = pem(91)
const logVerifierKey = verifierKeyOfSigner("localhost/pv-log", createPrivateKey(logSigningKey))
const subject = "DET-V1-ACME-ROBOTICS-0001"
const nodeFlags = serviceNodeFlags()

const startWitness = (name: string) =>
  startProcess("src/cli/main.ts", {
    PORT: "0",
    HOST: "127.0.0.1",
    PV_DATA_DIR: join(dataDir, name),
    PV_WITNESS_NAME: `bench.example/${name}`,
    PV_WITNESS_LOGS: logVerifierKey
  }, ["witness", "serve"], nodeFlags)

const startService = (name: string, env: Record<string, string>) =>
  startProcess("src/main.ts", {
    PORT: "0",
    HOST: "127.0.0.1",
    PV_BANNER: "true",
    PV_DATA_DIR: join(dataDir, name),
    PV_OPERATOR_TOKEN: operatorToken,
    PV_EVENT_SIGNING_KEY: pem(92),
    PV_LOG_SIGNING_KEY: logSigningKey,
    PV_LOG_RATE_LIMIT_PER_MINUTE: "1000000",
    PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "1000000",
    ...env
  }, [], nodeFlags)

const createKey = async (service: Process): Promise<string> => {
  const response = await fetch(`${service.baseUrl}/api/v1/api-keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" },
    body: JSON.stringify({ tenant_id: "bench", name: "bench", scopes: ["receipt:read", "receipt:write"], rate_limit_per_minute: 1_000_000, daily_quota: 1_000_000_000 })
  })
  if (response.status !== 201) throw new Error(`key creation failed: ${response.status} ${await response.text()}`)
  return ((await response.json()) as { api_key: string }).api_key
}

const receiptBody = (principal: string) => JSON.stringify({
  tenant_id: "bench", organization: "Bench Org", principal, subject_public_id: subject,
  purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"]
})

/** Samples receipts while `running`: acknowledgment → proof bundle 200 (a witnessed checkpoint covers it), in ms. */
const sampleWitnessing = async (service: Process, key: string, running: () => boolean): Promise<Array<number>> => {
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
  const samples: Array<Promise<number>> = []
  let n = 0
  while (running()) {
    const created = await fetch(`${service.baseUrl}/api/v1/reliance-receipts`, { method: "POST", headers, body: receiptBody(`sample-${n++}`) })
    const acknowledged = performance.now()
    const { receipt_id } = (await created.json()) as { receipt_id: string }
    samples.push((async () => {
      for (;;) {
        const proof = await fetch(`${service.baseUrl}/api/v1/reliance-receipts/${receipt_id}/proof`, { headers })
        await proof.arrayBuffer()
        if (proof.status === 200) return performance.now() - acknowledged
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
    })())
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return Promise.all(samples)
}

const receipts = async (name: string, env: Record<string, string>, sample: boolean) => {
  const service = await startService(name, env)
  try {
    const key = await createKey(service)
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    const url = `${service.baseUrl}/api/v1/reliance-receipts`
    await load({ connections, seconds: Math.max(2, seconds / 3), url, method: "POST", headers, body: receiptBody(`warm-[<id>]`), idReplacement: true })
    let running = true
    const sampled = sample ? sampleWitnessing(service, key, () => running) : Promise.resolve([])
    const result = await load({ connections, seconds, url, method: "POST", headers, body: receiptBody(`${name}-[<id>]`), idReplacement: true })
    running = false
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${name}: ${result.non2xx} non-2xx answers, ${result.errors} errors: ${JSON.stringify(result.statusCodes)}`)
    return { result, latencies: (await sampled).sort((a, b) => a - b) }
  } finally {
    await service.stop()
  }
}

const w1 = await startWitness("w1")
const w2 = await startWitness("w2")
try {
  const keyOf = async (w: Process) => ((await (await fetch(`${w.baseUrl}/witness/key`)).json()) as { verifier_key: string }).verifier_key
  const witnesses = `${w1.baseUrl}=${await keyOf(w1)},${w2.baseUrl}=${await keyOf(w2)}`
  log("receipts without witnesses")
  const plain = await receipts("plain", {}, false)
  log("receipts with two witnesses, quorum 2")
  const witnessed = await receipts("witnessed", { PV_LOG_WITNESSES: witnesses, PV_LOG_WITNESS_QUORUM: "2" }, true)
  const at = (q: number) => witnessed.latencies[Math.min(witnessed.latencies.length - 1, Math.floor(q * witnessed.latencies.length))] ?? NaN
  console.log(`| POST reliance-receipts (new), no witnesses / 2 witnesses (quorum 2) | ${plain.result.requestsPerSecond.toFixed(0)} / ${witnessed.result.requestsPerSecond.toFixed(0)} req/s | ` +
    `${(witnessed.result.requestsPerSecond / plain.result.requestsPerSecond).toFixed(2)} × |`)
  console.log(`| acknowledgment → witnessed checkpoint under that load (${witnessed.latencies.length} samples) | p50 ${at(0.5).toFixed(0)} ms | p99 ${at(0.99).toFixed(0)} ms | max ${at(1).toFixed(0)} ms |`)
} finally {
  await w1.stop()
  await w2.stop()
  rmSync(dataDir, { recursive: true, force: true })
}
