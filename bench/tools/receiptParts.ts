// `npm run bench:tool -- receiptParts [--receipts N] [--inflight 1,4,16] [--rounds R]`: what a new receipt costs
// outside HTTP and the framework, part by part, in this process (no server). First the pure work, with the
// service's own functions (evaluation, sealing, the Ed25519 signature, the log entry, the stored JSON text). Then
// the write: the service's ReceiptsRepo (its group commit on the service's own database layer, migrations and all,
// the log on, tracing off) with K receipts in flight, against the same statement sent through `pg`
// (node-postgres) with as many receipts each as the repo's commits held, on enough connections to keep K in
// flight. CPU µs per receipt from process.cpuUsage over N receipts after N of warm-up, in rounds that alternate
// which goes first (medians); the repo's receipts per commit from pg_stat_database. At K = 1 each wait for
// PostgreSQL leaves the process idle, so its wake-ups count too: a server under load pays less of that.
// PostgreSQL at DATABASE_URL (default the local server), in a scratch database dropped afterwards.
import { generateKeyPairSync } from "node:crypto"
import { parseArgs } from "node:util"
import { Effect, Layer, References, Result, Schema } from "effect"
import pg from "pg"
import { DeterminationBody } from "../../src/domain/Determination.js"
import { digestOf } from "../../src/domain/Canonical.js"
import { buildMachineTrust } from "../../src/domain/MachineTrust.js"
import { ReceiptSchemaId, RelianceReceipt, RelianceRequest, sealReceipt } from "../../src/domain/Receipt.js"
import { signerFromPrivateKey } from "../../src/events/Signer.js"
import { entryBytesOf, receiptEntryOf, signReceiptDigest } from "../../src/log/Entries.js"
import { AppConfig } from "../../src/platform/Config.js"
import { DatabaseLive } from "../../src/platform/Database.js"
import { Ids } from "../../src/platform/Ids.js"
import { evaluateActionability } from "../../src/receipts/Actionability.js"
import { ReceiptsRepo } from "../../src/receipts/Repo.js"
import { Policy } from "../../src/trust/Policy.js"
import { adminQuery, benchAdminUrl, databaseCommits, profileDeterminationBody, profileReceiptRequest } from "../lib.js"

const { values } = parseArgs({
  options: { receipts: { type: "string", default: "10000" }, inflight: { type: "string", default: "1,4,16" }, rounds: { type: "string", default: "3" } }
})
const n = Number(values.receipts)
const rounds = Number(values.rounds)
const inflights = values.inflight.split(",").map(Number)
const publicId = "DET-V1-PROF-0001"
const policy = Effect.runSync(Effect.provide(Policy, Policy.layer))
const asOf = Date.now() - 86_400_000
const body = Schema.decodeUnknownSync(DeterminationBody)(profileDeterminationBody(asOf))
const trust = buildMachineTrust(
  { public_id: publicId, determination_id: `dv_01J${"0".repeat(23)}`, version: 1, body, determination_digest: digestOf(body), evidence_digest: digestOf(body.evidence), recorded_at: new Date(asOf).toISOString() },
  policy.ref, { sequence: 1, eventHash: "e".repeat(64) }, Date.now()
)
const signer = signerFromPrivateKey(generateKeyPairSync("ed25519").privateKey, "ephemeral")
const requestOf = (principal: string) => Schema.decodeUnknownSync(RelianceRequest)(profileReceiptRequest(publicId, principal))

/** CPU µs per call of `f` over `n` calls, after `n` of warm-up. */
const perCall = (f: (i: number) => unknown): number => {
  for (let i = 0; i < n; i++) f(i)
  const before = process.cpuUsage()
  for (let i = 0; i < n; i++) f(i)
  const used = process.cpuUsage(before)
  return (used.user + used.system) / n
}

const request = requestOf("p-0")
const evaluation = Result.getOrThrow(evaluateActionability(trust, policy, request))
const sealedOf = (i: number) => sealReceipt({ schema: ReceiptSchemaId, receipt_id: `rr_01KB${String(i).padStart(22, "0")}`, created_at: new Date().toISOString(), ...evaluation })
const sealed = sealedOf(0)
const signed: RelianceReceipt = { ...sealed, signature: signReceiptDigest(sealed.receipt_digest, signer) }
const pure: Array<[string, number]> = [
  ["evaluation (policy rule, verdicts)", perCall(() => evaluateActionability(trust, policy, request))],
  ["sealing (RFC 8785 text, SHA-256)", perCall(sealedOf)],
  ["Ed25519 signature of the digest", perCall(() => signReceiptDigest(sealed.receipt_digest, signer))],
  ["the log entry's bytes", perCall(() => entryBytesOf(receiptEntryOf(signed)))],
  ["the stored JSON text", perCall(() => JSON.stringify(signed))]
]

const dbName = `pv_parts_${process.pid}`
const url = new URL(benchAdminUrl)
url.pathname = `/${dbName}`
await adminQuery(`CREATE DATABASE ${dbName}`)

/** 2 × n new receipts (warm-up, then measured), each a principal of its own, signed. */
const receiptsFor = (run: string) =>
  Effect.gen(function*() {
    const ids = yield* Ids
    const out: Array<RelianceReceipt> = []
    for (let i = 0; i < 2 * n; i++) {
      const made = Result.getOrThrow(evaluateActionability(trust, policy, requestOf(`${run}-${i}`)))
      const sealedReceipt = sealReceipt({ schema: ReceiptSchemaId, receipt_id: yield* ids.make("rr"), created_at: new Date().toISOString(), ...made })
      out.push({ ...sealedReceipt, signature: signReceiptDigest(sealedReceipt.receipt_digest, signer) })
    }
    return out
  }).pipe(Effect.provide(Ids.layer))

const measured = async (run: (receipts: ReadonlyArray<RelianceReceipt>) => Promise<void>, receipts: ReadonlyArray<RelianceReceipt>) => {
  await run(receipts.slice(0, n))
  const before = process.cpuUsage()
  await run(receipts.slice(n))
  const used = process.cpuUsage(before)
  return { cpu: (used.user + used.system) / n }
}

/** The repo's statement for `xs`, through `pg`. */
const insertPlainly = (pool: pg.Pool, xs: ReadonlyArray<RelianceReceipt>) => {
  const params: Array<unknown> = []
  const tuples = xs.map((r) => {
    params.push(r.receipt_id, r.tenant_id, r.principal, r.subject_public_id, r.purpose_id, r.requested_action, r.determination_digest,
      r.determination_id, r.decision, r.receipt_digest, JSON.stringify(r), new Date(r.created_at))
    return `(${Array.from({ length: 12 }, (_, k) => `$${params.length - 11 + k}`).join(", ")})`
  })
  params.push(xs.map((r) => r.receipt_id), xs.map((r) => Buffer.from(entryBytesOf(receiptEntryOf(r)))))
  return pool.query(`
    WITH inserted AS (
      INSERT INTO reliance_receipts (receipt_id, tenant_id, principal, subject_public_id, purpose_id, requested_action,
        determination_digest, determination_id, decision, receipt_digest, receipt, created_at)
      VALUES ${tuples.join(", ")}
      ON CONFLICT (tenant_id, principal, subject_public_id, purpose_id, requested_action, determination_digest) DO NOTHING
      RETURNING receipt_id
    ), enqueued AS (
      INSERT INTO log_pending (kind, ref, entry) SELECT 'receipt', e.ref, e.entry
      FROM unnest($${params.length - 1}::text[], $${params.length}::bytea[]) AS e(ref, entry) JOIN inserted ON inserted.receipt_id = e.ref
    )
    SELECT receipt_id FROM inserted`, params)
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
type Row = { inflight: number; repo: Array<number>; perCommit: Array<number>; driver: Array<number>; batch: number }
const rows: Array<Row> = []
try {
  const env = { DATABASE_URL: url.href, PV_LOG_ENABLED: "true", PV_DEV_EPHEMERAL_KEYS: "true" }
  // Tracing off, as in the service when OTEL_EXPORTER_OTLP_ENDPOINT is unset (observability/Tracing.ts).
  const layer = ReceiptsRepo.layer.pipe(
    Layer.provideMerge(DatabaseLive),
    Layer.provide(AppConfig.layerFromEnv(env)),
    Layer.provideMerge(Layer.succeed(References.TracerEnabled, false))
  )
  const viaRepo = async (inflight: number, round: number) => {
    const receipts = await Effect.runPromise(receiptsFor(`repo-${inflight}-${round}`))
    const commitsBefore = await databaseCommits(dbName)
    // The layer is built and closed per run: its connections' statistics reach pg_stat_database when they close.
    const { cpu } = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const repo = yield* ReceiptsRepo
      return yield* Effect.promise(() => measured((xs) =>
        Effect.runPromise(Effect.forEach(xs, (r) => repo.insertOrFetch(r), { concurrency: inflight, discard: true })), receipts))
    }).pipe(Effect.provide(layer))))
    return { cpu, perCommit: 2 * n / (await databaseCommits(dbName) - commitsBefore) }
  }
  // The driver alone: the repo's statement with as many receipts as the repo's commits held, on as many connections
  // as keep `inflight` receipts in flight (at most 4, the repo's writers).
  const viaDriver = async (inflight: number, round: number, batch: number) => {
    const receipts = await Effect.runPromise(receiptsFor(`driver-${inflight}-${round}`))
    const pool = new pg.Pool({ connectionString: url.href, max: Math.max(1, Math.min(4, Math.round(inflight / batch))) })
    try {
      return (await measured(async (xs) => {
        let next = 0
        await Promise.all(Array.from({ length: pool.options.max }, async () => {
          while (next < xs.length) {
            const taken = xs.slice(next, next + batch)
            next += batch
            const { rowCount } = await insertPlainly(pool, taken)
            if (rowCount !== taken.length) throw new Error(`stored ${rowCount} of ${taken.length}`)
          }
        }))
      }, receipts)).cpu
    } finally {
      await pool.end()
    }
  }
  for (const inflight of inflights) {
    const row: Row = { inflight, repo: [], perCommit: [], driver: [], batch: 0 }
    // Rounds alternate which goes first (repo, driver; driver, repo; …); the driver's batch is the repo's first run's.
    for (let round = 0; round < rounds; round++) {
      if (round % 2 === 1) row.driver.push(await viaDriver(inflight, round, row.batch))
      const { cpu, perCommit } = await viaRepo(inflight, round)
      row.repo.push(cpu)
      row.perCommit.push(perCommit)
      if (round === 0) row.batch = Math.max(1, Math.round(perCommit))
      if (round % 2 === 0) row.driver.push(await viaDriver(inflight, round, row.batch))
    }
    rows.push(row)
  }
} finally {
  await adminQuery(`DROP DATABASE IF EXISTS ${dbName}`)
}

console.log(`A new receipt's parts outside HTTP, ${n} receipts each after as many of warm-up, one process; ${new Date().toISOString()}\n`)
console.log("| pure work | CPU µs |\n|---|---:|")
for (const [label, us] of pure) console.log(`| ${label} | ${us.toFixed(1)} |`)
console.log(`| all of it | ${pure.reduce((sum, [, us]) => sum + us, 0).toFixed(1)} |`)
console.log(`\n| receipts in flight | ReceiptsRepo: CPU µs / receipt (rounds) | receipts / commit | \`pg\`, the same statement: CPU µs / receipt (rounds) | repo ÷ pg |\n|---:|---|---:|---|---:|`)
const rounded = (xs: ReadonlyArray<number>) => `${median(xs).toFixed(1)} (${xs.map((x) => x.toFixed(0)).join(", ")})`
for (const row of rows) {
  console.log(`| ${row.inflight} | ${rounded(row.repo)} | ${median(row.perCommit).toFixed(1)} | ${rounded(row.driver)}, batches of ${row.batch} | ` +
    `${(median(row.repo) / median(row.driver)).toFixed(2)} |`)
}
