// `node --import tsx bench/tools/idleProbe.ts`: the compiled server's CPU and database transactions per second while idle
// (PostgreSQL scratch database, dropped afterwards): the floor under every CPU-per-request figure.
import { generateKeyPairSync, randomBytes } from "node:crypto"
import pg from "pg"
import { adminQuery, benchAdminUrl, cpuSeconds, serviceNodeFlags, startProcess } from "../lib.js"
const pem = () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const dbName = `pv_idle_${Date.now()}`
await adminQuery(`CREATE DATABASE ${dbName}`)
const url = new URL(benchAdminUrl); url.pathname = `/${dbName}`
const commits = async () => { const c = new pg.Client({ connectionString: benchAdminUrl }); await c.connect(); const { rows } = await c.query("SELECT xact_commit::int AS n FROM pg_stat_database WHERE datname = $1", [dbName]); await c.end(); return rows[0].n as number }
try {
  const s = await startProcess("dist/src/main.js", { DATABASE_URL: url.toString(), NODE_ENV: "production", PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false",
    PV_OPERATOR_TOKEN: `x_${randomBytes(24).toString("hex")}`, PV_EVENT_SIGNING_KEY: pem(), PV_LOG_SIGNING_KEY: pem(), PV_WEBHOOK_SIGNING_KEY: pem(), PV_WORKERS: "1", REDIS_URL: "" }, [], serviceNodeFlags())
  await new Promise((r) => setTimeout(r, 3000))
  const c0 = cpuSeconds(s.child.pid!), t0 = await commits()
  await new Promise((r) => setTimeout(r, 10000))
  console.log(`idle: ${((cpuSeconds(s.child.pid!) - c0) * 100).toFixed(1)} ms CPU/s, ${((await commits()) - t0) / 10} transactions/s`)
  await s.stop()
} finally { await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`) }
