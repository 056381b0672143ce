// `npm run bench:profile -- <machine|mcp|mcp2026|receipts|events|tile|inclusion>`: one scenario under load against a server
// started with --cpu-prof, then the hottest functions and packages by self time. PostgreSQL (DATABASE_URL
// or the local default) in a scratch database, dropped afterwards.
import { readdirSync, readFileSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import pg from "pg"
import { benchPublicId, chainPublicId, mcp2025Body, mcp2026Body, mcp2026Headers } from "../data.js"
import { load, runScript, startProcess } from "../lib.js"
import { summarise } from "../profileSummary.js"

const scenario = process.argv[2] ?? "machine"
const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const dbName = `pv_profile_${Date.now()}`
const profileDir = mkdtempSync(join(tmpdir(), "pv-profile-"))
const operatorToken = `profile_${randomBytes(24).toString("hex")}`

const admin = async (sql: string) => {
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  await client.query(sql)
  await client.end()
}


const main = async () => {
  await admin(`CREATE DATABASE ${dbName}`)
  const url = new URL(adminUrl)
  url.pathname = `/${dbName}`
  const env = {
    DATABASE_URL: url.toString(), NODE_ENV: "production", PORT: "0", PV_BANNER: "true", PV_DEMO_DATA: "false",
    PV_OPERATOR_TOKEN: operatorToken, REDIS_URL: "", PV_LOG_RATE_LIMIT_PER_MINUTE: "100000000",
    PV_EVENT_SIGNING_KEY: generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
    PV_LOG_SIGNING_KEY: generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
    PV_WEBHOOK_SIGNING_KEY: generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString()
  }
  try {
    await runScript("bench/seed.ts", ["--determinations", "1000", "--chain", "PAGE:150"], env)
    const service = await startProcess("src/main.ts", env, [], ["--cpu-prof", `--cpu-prof-dir=${profileDir}`])
    const created = await fetch(`${service.baseUrl}/api/v1/api-keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" },
      body: JSON.stringify({ tenant_id: "bench", name: "p", scopes: ["trust:read", "receipt:write", "mcp:call"], rate_limit_per_minute: 1_000_000, daily_quota: 1_000_000_000 })
    })
    const key = ((await created.json()) as { api_key: string }).api_key
    const auth = { authorization: `Bearer ${key}` }
    const json = { ...auth, "content-type": "application/json" }
    const id = benchPublicId(1)
    // The log's reads: 300 receipts first (a full tile, a full bundle, partial tiles), integrated.
    let logSize = 0
    if (scenario === "tile" || scenario === "inclusion") {
      for (let i = 0; i < 300; i++) {
        const reply = await fetch(`${service.baseUrl}/api/v1/reliance-receipts`, {
          method: "POST", headers: json,
          body: JSON.stringify({ tenant_id: "bench", organization: "o", principal: `log-${i}`, subject_public_id: id, purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"] })
        })
        if (reply.status !== 201) throw new Error(`seed: ${reply.status}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 2_500))
      logSize = Number((await fetch(`${service.baseUrl}/log/checkpoint`).then((r) => r.text())).split("\n")[1])
    }
    const options = {
      machine: { url: `${service.baseUrl}/api/v1/trust/${id}/machine`, headers: auth },
      mcp: {
        url: `${service.baseUrl}/api/v1/mcp`, method: "POST", headers: { ...json, accept: "application/json, text/event-stream" },
        body: mcp2025Body(id), idReplacement: true
      },
      mcp2026: {
        url: `${service.baseUrl}/api/v1/mcp`, method: "POST",
        headers: { ...json, accept: "application/json, text/event-stream", ...mcp2026Headers },
        body: mcp2026Body(id), idReplacement: true
      },
      receipts: {
        url: `${service.baseUrl}/api/v1/reliance-receipts`, method: "POST", headers: json, idReplacement: true,
        body: JSON.stringify({ tenant_id: "bench", organization: "o", principal: "p-[<id>]", subject_public_id: id, purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"] })
      },
      events: { url: `${service.baseUrl}/api/v1/events?public_id=${chainPublicId("PAGE")}&after=0&limit=100`, headers: auth },
      tile: { url: `${service.baseUrl}/log/tile/0/000` },
      inclusion: { url: `${service.baseUrl}/log/proof/inclusion?index=100&tree_size=${logSize}` }
    }[scenario]
    if (options === undefined) throw new Error(`unknown scenario ${scenario}`)
    const result = await load({ connections: 32, seconds: 10, ...options })
    await service.stop()
    console.log(`${scenario}: ${result.requestsPerSecond.toFixed(0)} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms, non-2xx ${result.non2xx}`)
    const file = readdirSync(profileDir).filter((f) => f.endsWith(".cpuprofile")).map((f) => join(profileDir, f))
      .sort((a, b) => readFileSync(b).length - readFileSync(a).length)[0]!
    console.log(summarise(file))
  } finally {
    await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
    rmSync(profileDir, { recursive: true, force: true })
  }
}

main().then(() => process.exit(0), (e) => (console.error(e), process.exit(1)))
