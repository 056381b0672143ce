// `npm run bench:webhooks`: webhook delivery on PostgreSQL, one service process (PV_WORKERS=1), apart from
// `npm run bench` so it can run alone (about 2½ minutes). It builds and starts the service as `npm start`
// runs it, with two loopback receivers in their own process (bench/webhookReceiver.ts: one answers 204,
// one always 500), creates subscriptions through POST /api/v1/subscriptions, makes changes with the
// operator's PUT /api/v1/determinations/{id} (one event each) and prints a markdown table with targets:
//   1. fan-out: one change on a determination with 1,000 subscriptions, all delivered within 5 s;
//   2. steady state: 100 subscriptions on 10 determinations, 50 changes/s for 20 s: lag p99 ≤ 1 s;
//   3. growth: server CPU per delivery of (2) with 100 and with 10,000 subscriptions in all (the rest
//      idle rows on determinations that do not change): within 1.2 ×;
//   4. 1,000 subscriptions to the failing receiver retrying while GET /machine is driven with autocannon:
//      throughput ≥ 0.9 × and server CPU per request ≤ 1.1 × the same GET without them (before and after),
//      in the first 8 s of the outage and again from 30 s on, when the backoff has spread the retries.
//   5. fair delivery: 1,000 subscriptions on one determination, 10 of them to a receiver (its own origin)
//      that hangs 10 s on every request, served by 2 service processes sharing the database: after one
//      change every other subscription has it within 5 s (p100) of the PUT's answer.
// Lag is a delivery's arrival at the receiver minus the moment the PUT that made the event was answered
// (both wall clocks of this machine); the event's occurred_at, the figure the service's own
// pv_webhook_delivery_lag_seconds uses, is reported beside it. Server CPU is utime + stime from /proc of the
// service process over a window (until the last delivery arrived), so CPU per delivery includes the PUTs;
// the same PUTs on determinations nobody subscribed to are measured too ("net of the change"), and the CPU
// of the PostgreSQL backends serving the bench database is reported beside it (when the server is local).
//   npm run bench:webhooks [-- --only fanout,steady,growth,failing,hanging] [--seconds 20] [--rate 50] [--fanout 1000]
//     [--total 10000] [--failing 1000] [--failingUrls distinct|one] [--getSeconds 8] [--laterFrom 30] [--connections 32]
// Uses a fresh database on DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432/postgres),
// dropped afterwards; the JSON result goes to bench/results/.
import { execFileSync } from "node:child_process"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { mkdirSync, writeFileSync } from "node:fs"
import { cpus, loadavg, totalmem } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import pg from "pg"
import { benchBody, benchPublicId } from "./data.js"
import { benchServiceEnv, cpuSeconds, load, type LoadResult, mapConcurrent, type Process, root, runScript, serviceNodeFlags, startProcess } from "./lib.js"

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "20" },
    rate: { type: "string", default: "50" },
    fanout: { type: "string", default: "1000" },
    total: { type: "string", default: "10000" },
    failing: { type: "string", default: "1000" },
    failingUrls: { type: "string", default: "distinct" },
    getSeconds: { type: "string", default: "8" },
    laterFrom: { type: "string", default: "30" },
    connections: { type: "string", default: "32" },
    only: { type: "string", default: "fanout,steady,growth,failing,hanging" }
  }
})
const only = new Set(values.only!.split(","))
const seconds = Number(values.seconds)
const rate = Number(values.rate)
const fanoutSize = Number(values.fanout)
const totalSubscriptions = Number(values.total)
const failingSize = Number(values.failing)
// The failing subscriptions' URLs: each its own path on the failing receiver, or all one URL (which the
// worker's per-URL probing then tries once per backoff step instead of once per subscription).
const failingOneUrl = values.failingUrls === "one"
const getSeconds = Number(values.getSeconds)
const laterFrom = Number(values.laterFrom)
const connections = Number(values.connections)
const log = (line: string) => console.error(`[bench:webhooks] ${line}`)
const now = () => performance.timeOrigin + performance.now()
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// Determinations: 0–9 change in the steady state (10 subscriptions each), 10 fans out, 11 has the failing
// subscriptions, 20–119 only hold idle subscriptions.
const SteadyGroups = 10
const PerGroup = 10
const FanoutIndex = 10
const FailingIndex = 11
const IdleFrom = 20
const IdleHosts = 100
// The fair-delivery scenario's determination, after the idle ones; its hanging subscriptions.
const HangingIndex = IdleFrom + IdleHosts
const HangingSubscriptions = 10
const HangMs = 10_000

const operatorToken = `bench_${randomBytes(24).toString("hex")}`
const signingKey = generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString()
const logSigningKey = generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString()
const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const dbName = `pv_bench_webhooks_${Date.now()}`
const databaseUrl = (() => {
  const url = new URL(adminUrl)
  url.pathname = `/${dbName}`
  return url.toString()
})()
const admin = async <A>(url: string, f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

const serviceEnv = {
  DATABASE_URL: databaseUrl,
  ...benchServiceEnv({ operatorToken, signingKey, logSigningKey }),
  PV_WORKERS: "1",
  PV_WEBHOOK_ALLOW_HTTP: "true",
  PV_WEBHOOK_ALLOW_PRIVATE: "true"
}

// ---- receivers ------------------------------------------------------------------------------------
type Arrival = readonly [arrival: number, publicId: string, version: number, occurredAt: number, path: string]

/** A receiver process and what it has recorded so far (fetched on demand). */
const startReceiver = async (status: number, delayMs = 0) => {
  const process_ = await startProcess("bench/webhookReceiver.ts", {}, [String(status), String(delayMs)])
  const arrivals: Array<Arrival> = []
  const poll = async () => {
    const fresh = (await (await fetch(`${process_.baseUrl}/_records?from=${arrivals.length}`)).json()) as Array<Arrival>
    arrivals.push(...fresh)
    return arrivals
  }
  return { process: process_, url: process_.baseUrl, arrivals, poll }
}
type Receiver = Awaited<ReturnType<typeof startReceiver>>

// ---- the service's API ------------------------------------------------------------------------------
const createKey = async (service: Process): Promise<string> => {
  const response = await fetch(`${service.baseUrl}/api/v1/api-keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" },
    body: JSON.stringify({
      tenant_id: "bench", name: "bench", scopes: ["trust:read", "subscription:write"],
      rate_limit_per_minute: 1_000_000, daily_quota: 1_000_000_000
    })
  })
  if (response.status !== 201) throw new Error(`key creation failed: ${response.status} ${await response.text()}`)
  return ((await response.json()) as { api_key: string }).api_key
}

const subscribe = async (service: Process, key: string, publicId: string, webhookUrl: string) => {
  const post = () =>
    fetch(`${service.baseUrl}/api/v1/subscriptions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ public_id: publicId, webhook_url: webhookUrl })
    })
  let response = await post()
  // Set-up is not measured: a 503 overloaded from the adaptive admission limit is retried, as a client would.
  for (let retries = 0; response.status === 503 && retries < 20; retries++) {
    await response.arrayBuffer()
    await new Promise((done) => setTimeout(done, 100))
    response = await post()
  }
  if (response.status !== 201) throw new Error(`subscription failed: ${response.status} ${await response.text()}`)
  await response.arrayBuffer()
}

const subscribeMany = (service: Process, key: string, publicId: (i: number) => string, url: (i: number) => string, n: number) =>
  mapConcurrent(Array.from({ length: n }, (_, i) => i), 16, (i) => subscribe(service, key, publicId(i), url(i)))

/** When each change's PUT was answered, by `public_id#version` (the version is in the event's payload). */
const acknowledged = new Map<string, number>()
const variants = new Map<number, number>()
const bodyNow = Date.now()

/** PUTs answered 503 `overloaded` (and sent again after Retry-After, as a client would). */
let refusedChanges = 0

/** One change: a PUT with a body that differs from the stored one (a new variant), so exactly one event. */
const change = async (service: Process, i: number): Promise<string> => {
  const variant = (variants.get(i) ?? 0) + 1
  variants.set(i, variant)
  const send = () =>
    fetch(`${service.baseUrl}/api/v1/determinations/${benchPublicId(i)}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" },
      body: JSON.stringify(benchBody(i, bodyNow, variant))
    })
  let response = await send()
  for (let tries = 0; response.status === 503 && tries < 100; tries++) {
    refusedChanges += 1
    await response.arrayBuffer()
    await sleep(Math.min(1_000, 1000 * Number(response.headers.get("retry-after") ?? "0.1")))
    response = await send()
  }
  const at = now()
  const body = (await response.json()) as { outcome: string; version: number }
  if (response.status !== 200 || body.outcome !== "updated") throw new Error(`PUT ${i}: ${response.status} ${JSON.stringify(body)}`)
  const id = `${benchPublicId(i)}#${body.version}`
  acknowledged.set(id, at)
  return id
}

// ---- measuring -------------------------------------------------------------------------------------
const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!

interface Lags {
  readonly deliveries: number
  readonly expected: number
  /** ms after the PUT was answered */
  readonly p50: number
  readonly p99: number
  readonly max: number
  /** ms after the event's occurred_at */
  readonly occurredP50: number
  readonly occurredP99: number
}

/**
 * Waits (at most `timeoutMs`) until each change in `events` has reached `perEvent` distinct receiver paths,
 * then the lag of each first arrival (a redelivery, at least once, is not counted twice).
 */
const collect = async (receiver: Receiver, from: number, events: ReadonlyArray<string>, perEvent: number, timeoutMs: number): Promise<Lags> => {
  const wanted = new Set(events)
  const expected = events.length * perEvent
  const deadline = now() + timeoutMs
  const first = new Map<string, Arrival>()
  for (;;) {
    const arrivals = await receiver.poll()
    for (let k = from; k < arrivals.length; k++) {
      const a = arrivals[k]!
      const id = `${a[1]}#${a[2]}`
      const key = `${id} ${a[4]}`
      if (wanted.has(id) && !first.has(key)) first.set(key, a)
    }
    from = arrivals.length
    if (first.size >= expected || now() > deadline) break
    await sleep(50)
  }
  const lags: Array<number> = []
  const fromOccurred: Array<number> = []
  for (const a of first.values()) {
    lags.push(a[0] - acknowledged.get(`${a[1]}#${a[2]}`)!)
    fromOccurred.push(a[0] - a[3])
  }
  lags.sort((a, b) => a - b)
  fromOccurred.sort((a, b) => a - b)
  return {
    deliveries: first.size, expected, p50: quantile(lags, 0.5), p99: quantile(lags, 0.99), max: lags[lags.length - 1] ?? Number.NaN,
    occurredP50: quantile(fromOccurred, 0.5), occurredP99: quantile(fromOccurred, 0.99)
  }
}

/**
 * `rate` changes a second for `duration` s, open loop, round-robin over the determinations `first` to
 * `first + SteadyGroups - 1` (each with `perEvent` subscriptions); lags, and the service's CPU per delivery
 * and per change over the whole window (until the last delivery arrived).
 */
const steady = async (service: Process, receiver: Receiver, duration: number, first = 0, perEvent = PerGroup) => {
  const from = (await receiver.poll()).length
  const dbBefore = await databaseCpu()
  const cpuBefore = cpuSeconds(service.child.pid!)
  const refusedBefore = refusedChanges
  const started = now()
  const puts: Array<Promise<string>> = []
  const count = Math.round(rate * duration)
  for (let k = 0; k < count; k++) {
    const wait = started + (k * 1000) / rate - now()
    if (wait > 0) await sleep(wait)
    puts.push(change(service, first + (k % SteadyGroups)))
  }
  const changesPerSecond = count / ((now() - started) / 1000 + 1 / rate)
  const events = await Promise.all(puts)
  const lags = await collect(receiver, from, events, perEvent, 30_000)
  const cpu = cpuSeconds(service.child.pid!) - cpuBefore
  const db = (await databaseCpu()) - dbBefore
  return {
    ...lags, changes: count, changesPerSecond, refused: refusedChanges - refusedBefore, cpuSeconds: cpu, databaseCpuSeconds: db,
    cpuMsPerDelivery: (1000 * cpu) / lags.deliveries, cpuMsPerChange: (1000 * cpu) / count,
    databaseMsPerDelivery: (1000 * db) / lags.deliveries, databaseMsPerChange: (1000 * db) / count
  }
}

const fanout = async (service: Process, receiver: Receiver) => {
  const from = (await receiver.poll()).length
  const dbBefore = await databaseCpu()
  const cpuBefore = cpuSeconds(service.child.pid!)
  const event = await change(service, FanoutIndex)
  const lags = await collect(receiver, from, [event], fanoutSize, 30_000)
  const cpu = cpuSeconds(service.child.pid!) - cpuBefore
  const db = (await databaseCpu()) - dbBefore
  return { ...lags, cpuMsPerDelivery: (1000 * cpu) / lags.deliveries, databaseMsPerDelivery: (1000 * db) / lags.deliveries }
}

/** autocannon on GET /machine, with the service's CPU per request over the same window. */
const machineLoad = async (service: Process, url: string, key: string) => {
  const dbBefore = await databaseCpu()
  const cpuBefore = cpuSeconds(service.child.pid!)
  const result: LoadResult = await load({ url, connections, seconds: getSeconds, headers: { authorization: `Bearer ${key}` } })
  const cpu = cpuSeconds(service.child.pid!) - cpuBefore
  const db = (await databaseCpu()) - dbBefore
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`GET /machine: ${JSON.stringify(result.statusCodes)}, ${result.errors} errors`)
  return { ...result, cpuSeconds: cpu, databaseCpuSeconds: db, cpuMsPerRequest: (1000 * cpu) / result.total }
}

/**
 * CPU time of the PostgreSQL backends serving the bench database (the service's pool and probe), when the
 * server runs on this machine; a connection that closes within a window takes its share along (under-counts).
 */
const databaseCpu = () =>
  admin(databaseUrl, async (c) => {
    const pids = (await c.query("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")).rows
    return pids.reduce((total: number, row: { pid: number }) => total + cpuSeconds(row.pid), 0)
  })

const subscriptionCount = () =>
  admin(databaseUrl, async (c) => Number((await c.query("SELECT count(*)::int AS n FROM subscriptions WHERE webhook_url IS NOT NULL")).rows[0].n))

// ---- run -------------------------------------------------------------------------------------------
type SteadyResult = Awaited<ReturnType<typeof steady>>
type MachineResult = Awaited<ReturnType<typeof machineLoad>>

const main = async () => {
  await admin(adminUrl, (c) => c.query(`CREATE DATABASE ${dbName}`))
  const processes: Array<Process> = []
  try {
    log("building (npm run build)")
    execFileSync("npm", ["run", "-s", "build"], { cwd: root, stdio: "inherit" })
    log(`seeding ${IdleFrom + IdleHosts} determinations`)
    await runScript("bench/seed.ts", ["--determinations", String(HangingIndex + 1)], serviceEnv)
    const ok = await startReceiver(204)
    processes.push(ok.process)
    const failing = await startReceiver(500)
    processes.push(failing.process)
    const service = await startProcess("dist/src/main.js", serviceEnv, [], serviceNodeFlags())
    processes.push(service)
    const key = await createKey(service)
    const rows: Array<Array<string>> = []
    const results: Record<string, unknown> = {}
    const ms = (n: number) => `${n.toFixed(n < 10 ? 1 : 0)} ms`
    const mark = (pass: boolean) => (pass ? "✅" : "❌")
    const count = (n: number) => n.toLocaleString("en-US")

    let small = 0
    let steadySmall: SteadyResult | undefined
    let alone: SteadyResult | undefined
    if (only.has("steady") || only.has("growth")) {
      log(`${SteadyGroups * PerGroup} subscriptions on ${SteadyGroups} determinations`)
      await subscribeMany(service, key, (i) => benchPublicId(i % SteadyGroups), (i) => `${ok.url}/s/${i}`, SteadyGroups * PerGroup)
      log("warming up: 5 s of steady changes")
      const warm = await steady(service, ok, 5)
      log(`  warm-up: ${warm.deliveries}/${warm.expected} delivered, p50 ${warm.p50.toFixed(1)} ms, p99 ${warm.p99.toFixed(1)} ms`)
      // What the changes alone cost (the same PUTs on determinations nobody subscribed to), to tell it apart.
      alone = await steady(service, ok, 5, FailingIndex + 1, 0)
      log(`  changes alone: ${alone.cpuMsPerChange.toFixed(3)} ms CPU per change, database ${alone.databaseMsPerChange.toFixed(3)} ms`)
      small = await subscriptionCount()
      log(`steady state with ${small} subscriptions: ${rate} changes/s for ${seconds} s`)
      steadySmall = await steady(service, ok, seconds)
      log(`  ${steadySmall.deliveries}/${steadySmall.expected} delivered at ${steadySmall.changesPerSecond.toFixed(1)} changes/s; lag p50 ${steadySmall.p50.toFixed(1)} ms, p99 ${steadySmall.p99.toFixed(1)} ms; CPU ${steadySmall.cpuMsPerDelivery.toFixed(3)} ms/delivery, database ${steadySmall.databaseMsPerDelivery.toFixed(3)} ms/delivery`)
      Object.assign(results, { warm, alone, steadySmall, small })
    }

    if (only.has("fanout")) {
      log(`fan-out: ${fanoutSize} subscriptions on ${benchPublicId(FanoutIndex)}`)
      await subscribeMany(service, key, () => benchPublicId(FanoutIndex), (i) => `${ok.url}/f/${i}`, fanoutSize)
      const fanouts: Array<Awaited<ReturnType<typeof fanout>>> = []
      for (let run = 0; run < 3; run++) {
        await sleep(1_000)
        const result = await fanout(service, ok)
        fanouts.push(result)
        log(`  run ${run + 1}: ${result.deliveries}/${result.expected} delivered, p50 ${result.p50.toFixed(0)} ms, p99 ${result.p99.toFixed(0)} ms, last ${result.max.toFixed(0)} ms; CPU ${result.cpuMsPerDelivery.toFixed(3)} ms/delivery, database ${result.databaseMsPerDelivery.toFixed(3)} ms`)
      }
      rows.push(...fanouts.map((r, k) => [
        `fan-out: 1 change → ${count(fanoutSize)} subscriptions (run ${k + 1})`,
        `${count(r.deliveries)} delivered; lag p50 ${ms(r.p50)}, p99 ${ms(r.p99)}; last ${ms(r.max)} after the PUT's answer (from occurred_at: p50 ${ms(r.occurredP50)}, p99 ${ms(r.occurredP99)}); CPU ${r.cpuMsPerDelivery.toFixed(3)} ms/delivery (database ${r.databaseMsPerDelivery.toFixed(3)} ms)`,
        `all within 5 s ${mark(r.deliveries === r.expected && r.max <= 5000)}`
      ]))
      results.fanouts = fanouts
    }

    const perChange = (r: SteadyResult) => alone === undefined ? "" : `, ${((r.cpuMsPerChange - alone.cpuMsPerChange) / PerGroup).toFixed(3)} ms net of the change itself`
    const steadyRow = (label: string, r: SteadyResult) => [
      label,
      `${count(r.deliveries)} of ${count(r.expected)} delivered (${r.changesPerSecond.toFixed(1)} changes/s${r.refused > 0 ? `; ${r.refused} PUTs answered 503 overloaded, sent again` : ""}); lag p50 ${ms(r.p50)}, p99 ${ms(r.p99)} (from occurred_at: ${ms(r.occurredP50)} / ${ms(r.occurredP99)}); CPU ${r.cpuMsPerDelivery.toFixed(3)} ms/delivery${perChange(r)} (database ${r.databaseMsPerDelivery.toFixed(3)} ms/delivery)`,
      `p99 ≤ 1 s, all delivered ${mark(r.p99 <= 1000 && r.deliveries === r.expected)}`
    ]
    if (steadySmall !== undefined) {
      rows.push(steadyRow(`steady: ${small} subscriptions on ${SteadyGroups} determinations, ${rate} changes/s × ${seconds} s`, steadySmall))
    }

    if (steadySmall !== undefined && alone !== undefined && only.has("growth")) {
      // Idle rows up to the total: webhook subscriptions (owing nothing) on determinations that do not change,
      // inserted as the service inserts them; ANALYZE as autovacuum would soon after.
      const idle = Math.max(0, totalSubscriptions - (await subscriptionCount()))
      log(`inserting ${idle} idle subscriptions`)
      await admin(databaseUrl, async (c) => {
        const { key_id } = (await c.query("SELECT key_id FROM api_keys WHERE tenant_id = 'bench' LIMIT 1")).rows[0]
        await c.query(`
          INSERT INTO subscriptions (subscription_id, tenant_id, key_id, public_id, after_sequence, created_at, pending_through,
            delivered_through, webhook_url, secret)
          SELECT 'sub_IDLE' || lpad(g::text, 22, '0'), 'bench', $1, d.public_id, d.head_sequence, now(), d.head_sequence,
            d.head_sequence, $2 || '/idle/' || g, 'whsec_' || md5(g::text)
          FROM generate_series(1, $3::int) g
          JOIN determinations d ON d.public_id = 'DET-V1-BENCH-' || lpad((${IdleFrom} + g % ${IdleHosts})::text, 7, '0')`,
        [key_id, ok.url, idle])
        await c.query("ANALYZE subscriptions")
      })
      const large = await subscriptionCount()
      log(`steady state with ${large} subscriptions`)
      const steadyLarge = await steady(service, ok, seconds)
      log(`  ${steadyLarge.deliveries}/${steadyLarge.expected} delivered; lag p50 ${steadyLarge.p50.toFixed(1)} ms, p99 ${steadyLarge.p99.toFixed(1)} ms; CPU ${steadyLarge.cpuMsPerDelivery.toFixed(3)} ms/delivery`)
      const growth = steadyLarge.cpuMsPerDelivery / steadySmall.cpuMsPerDelivery
      const net = (r: SteadyResult) => (r.cpuMsPerChange - alone!.cpuMsPerChange) / PerGroup
      rows.push(
        steadyRow(`steady, ${count(large)} subscriptions in all (the same 100 active)`, steadyLarge),
        [
          `growth: server CPU per delivery, ${small} → ${count(large)} subscriptions`,
          `${steadySmall.cpuMsPerDelivery.toFixed(3)} → ${steadyLarge.cpuMsPerDelivery.toFixed(3)} ms (${growth.toFixed(2)} ×); net of the changes ${net(steadySmall).toFixed(3)} → ${net(steadyLarge).toFixed(3)} ms (${(net(steadyLarge) / net(steadySmall)).toFixed(2)} ×); the changes alone ${alone.cpuMsPerChange.toFixed(3)} ms CPU each`,
          `≤ 1.2 × ${mark(growth <= 1.2)}`
        ]
      )
      Object.assign(results, { steadyLarge, large })
    }

    if (only.has("failing")) {
      // Failing receiver: GET /machine alone, with 1,000 failing subscriptions retrying, alone again.
      const machineUrl = `${service.baseUrl}/api/v1/trust/${benchPublicId(1)}/machine`
      await load({ url: machineUrl, connections, seconds: 3, headers: { authorization: `Bearer ${key}` } })
      log(`${failingSize} subscriptions to the failing receiver`)
      if (failingOneUrl) {
        // A key has one subscription per determination and URL: one URL for all takes a key each.
        const keys = await mapConcurrent(Array.from({ length: failingSize }, (_, i) => i), 16, () => createKey(service))
        await mapConcurrent(keys, 16, (k) => subscribe(service, k, benchPublicId(FailingIndex), `${failing.url}/x`))
      } else {
        await subscribeMany(service, key, () => benchPublicId(FailingIndex), (i) => `${failing.url}/x/${i}`, failingSize)
      }
      const before: MachineResult = await machineLoad(service, machineUrl, key)
      log(`  GET /machine without: ${before.requestsPerSecond.toFixed(0)} req/s, ${before.cpuMsPerRequest.toFixed(3)} ms CPU/request`)
      // The outage's onset (every subscription fails at once, then after 1, 2, 4 s …), and later, once the
      // backoff has spread the retries out (from `laterFrom` s after the first attempts).
      let attemptsFrom = (await failing.poll()).length
      const outageStarted = now()
      await change(service, FailingIndex)
      const during = await machineLoad(service, machineUrl, key)
      const attempts = (await failing.poll()).length - attemptsFrom
      log(`  GET /machine with ${failingSize} failing (onset): ${during.requestsPerSecond.toFixed(0)} req/s, ${during.cpuMsPerRequest.toFixed(3)} ms CPU/request; ${attempts} failed attempts`)
      await sleep(Math.max(0, outageStarted + laterFrom * 1000 - now()))
      attemptsFrom = (await failing.poll()).length
      const later = await machineLoad(service, machineUrl, key)
      const laterAttempts = (await failing.poll()).length - attemptsFrom
      log(`  GET /machine with ${failingSize} failing (from ${laterFrom} s on): ${later.requestsPerSecond.toFixed(0)} req/s, ${later.cpuMsPerRequest.toFixed(3)} ms CPU/request; ${laterAttempts} failed attempts`)
      // Disabled behind the worker's back: an attempt in flight then records a failure on a disabled row and counts as `disabled`.
      await admin(databaseUrl, (c) => c.query("UPDATE subscriptions SET status = 'disabled' WHERE public_id = $1", [benchPublicId(FailingIndex)]))
      await sleep(1_000)
      const after = await machineLoad(service, machineUrl, key)
      log(`  GET /machine without again: ${after.requestsPerSecond.toFixed(0)} req/s, ${after.cpuMsPerRequest.toFixed(3)} ms CPU/request`)
      const withoutRps = (before.requestsPerSecond + after.requestsPerSecond) / 2
      const withoutCpu = (before.cpuMsPerRequest + after.cpuMsPerRequest) / 2
      const withoutDatabase = (before.databaseCpuSeconds + after.databaseCpuSeconds) / 2
      const failingRow = (label: string, r: MachineResult, n: number) => {
        const throughputRatio = r.requestsPerSecond / withoutRps
        const cpuRatio = r.cpuMsPerRequest / withoutCpu
        const extraCpuMs = (r.cpuMsPerRequest - withoutCpu) * r.total
        const extraDatabaseMs = 1000 * (r.databaseCpuSeconds - withoutDatabase)
        return [
          label,
          `${count(Math.round(r.requestsPerSecond))} vs ${count(Math.round(before.requestsPerSecond))} / ${count(Math.round(after.requestsPerSecond))} req/s (${throughputRatio.toFixed(2)} ×); CPU ${r.cpuMsPerRequest.toFixed(3)} vs ${before.cpuMsPerRequest.toFixed(3)} / ${after.cpuMsPerRequest.toFixed(3)} ms/request (${cpuRatio.toFixed(2)} ×); ${count(n)} failed attempts in the ${getSeconds} s${n > 0 ? `, ≈ ${(extraCpuMs / n).toFixed(2)} ms CPU each (database ≈ ${(extraDatabaseMs / n).toFixed(2)} ms)` : ""}`,
          `throughput ≥ 0.9 × ${mark(throughputRatio >= 0.9)}; CPU/request ≤ 1.1 × ${mark(cpuRatio <= 1.1)}`
        ]
      }
      rows.push(
        failingRow(`GET /machine with ${count(failingSize)} subscriptions failing (HTTP 500, ${failingOneUrl ? "one URL" : "a URL each"}), the first ${getSeconds} s of the outage, vs without (before / after)`, during, attempts),
        failingRow(`the same from ${laterFrom} s into the outage`, later, laterAttempts)
      )
      results.machine = { before, during, attempts, later, laterAttempts, after }
    }

    if (only.has("hanging")) {
      // A second instance on the same database: the deliveries are shared through it (leases, NOTIFY).
      const second = await startProcess("dist/src/main.js", serviceEnv, [], serviceNodeFlags())
      processes.push(second)
      const hanging = await startReceiver(204, HangMs)
      processes.push(hanging.process)
      const healthy = fanoutSize - HangingSubscriptions
      log(`fair delivery: ${fanoutSize} subscriptions on ${benchPublicId(HangingIndex)}, ${HangingSubscriptions} to a receiver hanging ${HangMs / 1000} s; 2 instances`)
      await subscribeMany(service, key, () => benchPublicId(HangingIndex),
        (i) => (i < HangingSubscriptions ? `${hanging.url}/h/${i}` : `${ok.url}/h/${i}`), fanoutSize)
      const fair: Array<Lags> = []
      for (let run = 0; run < 3; run++) {
        await sleep(1_000)
        const from = (await ok.poll()).length
        const event = await change(service, HangingIndex)
        const lags = await collect(ok, from, [event], healthy, 30_000)
        fair.push(lags)
        log(`  run ${run + 1}: ${lags.deliveries}/${lags.expected} delivered, p50 ${lags.p50.toFixed(0)} ms, p99 ${lags.p99.toFixed(0)} ms, p100 ${lags.max.toFixed(0)} ms`)
      }
      rows.push(...fair.map((r, k) => [
        `fair delivery: 1 change → ${count(fanoutSize)} subscriptions, ${HangingSubscriptions} of them hanging ${HangMs / 1000} s, 2 instances (run ${k + 1})`,
        `${count(r.deliveries)} of ${count(r.expected)} others delivered; lag p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, p100 ${ms(r.max)} after the PUT's answer`,
        `p100 ≤ 5 s ${mark(r.deliveries === r.expected && r.max <= 5000)}`
      ]))
      results.fair = fair
    }

    if (refusedChanges > 0) log(`${refusedChanges} PUTs were answered 503 overloaded and sent again`)
    const metrics = await (await fetch(`${service.baseUrl}/metrics`)).text()
    log(`metrics: ${metrics.split("\n").filter((l) => l.startsWith("pv_webhook_deliveries_total")).join("; ")}`)
    const table = [
      `Run ${new Date().toISOString()} · PostgreSQL · 1 service process, PV_WEBHOOK_CONCURRENCY default · node ${process.version} · ${cpus().length} × ${cpus()[0]?.model ?? "cpu"} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · load average ${loadavg()[0]!.toFixed(1)} at the end`,
      "",
      "| scenario | measured | target |",
      "|---|---|---|",
      ...rows.map((r) => `| ${r.join(" | ")} |`)
    ].join("\n")
    console.log(table)
    mkdirSync(join(root, "bench/results"), { recursive: true })
    writeFileSync(join(root, "bench/results", `webhooks-${new Date().toISOString().replace(/[:.]/g, "-")}.json`), JSON.stringify({
      at: new Date().toISOString(), rate, seconds, fanoutSize, failingSize, failingUrls: values.failingUrls, ...results, table
    }, null, 2))
  } finally {
    await Promise.all(processes.map((p) => p.stop()))
    await admin(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`))
  }
}

main().then(() => process.exit(0), (e) => (console.error(e), process.exit(1)))
