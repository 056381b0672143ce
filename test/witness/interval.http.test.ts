import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { Clock, Context, Duration, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { peekCheckpoint } from "../../src/log/Checkpoint.js"
import { LogKey, testLogSigningSeed } from "../../src/log/LogKey.js"
import { LogRepo } from "../../src/log/Repo.js"
import { TransparencyLog } from "../../src/log/TransparencyLog.js"
import { WitnessRepo } from "../../src/log/WitnessRepo.js"
import { LogWitnessing } from "../../src/log/Witnessing.js"
import { AppConfig } from "../../src/platform/Config.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { testEnvironment } from "../support/testConfig.js"
import { startTestWitness, type TestWitness } from "../support/witness.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { verifierKeyOfSigner } from "../../src/log/Note.js"

/**
 * PV_LOG_WITNESS_INTERVAL_MS: a witness gets at most one submission per interval, counted from the start
 * of the one before, and the next as soon as the interval has passed and the log has grown. The service's
 * real witnessing (LogWitnessing, its TransparencyLog and WitnessRepo on the test server's database) runs
 * on Effect's test clock, submitting over HTTP to a real witness through a relay that holds each request
 * until the test lets it through, so the test decides how long a submission takes on that clock.
 */

const origin = "localhost/pv-log"
const logVerifierKey = verifierKeyOfSigner(origin, privateKeyFromSeed(testLogSigningSeed))
const subject = "DET-V1-WIT-PACE"
const interval = 1_000

let witness: TestWitness
let server: TestServer
let writer: string
const relayed: Array<{ readonly at: number; readonly pass: () => void }> = []
/** The test clock's time, as the relay stamps each submission when it arrives. */
let testNow: () => number = () => NaN
const relay = createServer((incoming: IncomingMessage, outgoing: ServerResponse) => {
  const chunks: Array<Buffer> = []
  incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
  incoming.on("end", () => {
    relayed.push({
      at: testNow(),
      pass: () =>
        void fetch(`${witness.baseUrl}${incoming.url}`, { method: "POST", headers: { "content-type": "text/plain" }, body: Buffer.concat(chunks) })
          .then(async (answer) => {
            outgoing.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "text/plain" })
            outgoing.end(await answer.text())
          })
    })
  })
})

beforeAll(async () => {
  witness = await startTestWitness([logVerifierKey], { PV_WITNESS_NAME: "witness.test/paced" })
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve))
  // The server itself has no witnesses: the only witnessing loop is the test's own, below.
  server = await startTestServer({ config: { logRateLimitPerMinute: 1_000_000 } })
  writer = (await createKey(server, ["receipt:write", "receipt:read", "trust:read"], { rate_limit_per_minute: 1_000_000 })).api_key
  expect((await putDetermination(server, subject, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
}, 180_000)

afterAll(async () => {
  await server?.close()
  await new Promise((resolve) => relay.close(resolve))
  await witness?.close()
})

/** Real time: polls until `ok`, failing after 20 s (a condition the code under test must reach, never a fixed wait). */
const until = (what: string, ok: () => boolean | Promise<boolean>) =>
  Effect.promise(async () => {
    const deadline = Date.now() + 20_000
    while (!(await ok())) {
      if (Date.now() > deadline) throw new Error(`waited 20 s for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })

const logSize = async () => {
  const checkpoint = peekCheckpoint((await request(server, "GET", "/log/checkpoint")).text)
  return checkpoint.ok ? checkpoint.value.size : -1
}

/** A new receipt, and the server's integrator has signed a checkpoint covering it. */
const grow = Effect.promise(async () => {
  const before = await logSize()
  const reply = await request(server, "POST", "/api/v1/reliance-receipts", {
    bearer: writer,
    body: {
      tenant_id: "tenant-a", organization: "Paced Buyers", principal: `agent-${Math.random()}`, subject_public_id: subject,
      purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"]
    }
  })
  expect(reply.status, reply.text).toBe(201)
  return before
}).pipe(Effect.flatMap((before) => until("a larger checkpoint", async () => (await logSize()) > before)))

describe("PV_LOG_WITNESS_INTERVAL_MS", () => {
  it("at most one submission per interval from the start of the one before; the next one as soon as it is due (test clock)", async () => {
    await until("the log's first checkpoint with entries", async () => (await logSize()) > 0).pipe(Effect.runPromise)
    const config = AppConfig.layerFromEnv(testEnvironment(), {
      logWitnesses: [{ url: `http://127.0.0.1:${(relay.address() as { port: number }).port}`, verifierKey: witness.verifierKey }],
      logWitnessQuorum: 1,
      logWitnessIntervalMs: interval
    })
    await server.run(Effect.scoped(Effect.gen(function*() {
      const test = yield* TestClock.make({ warningDelay: "1 minute" })
      testNow = () => test.currentTimeMillisUnsafe()
      // The loop's own sleeps (not those of any other fiber): when it is parked, and for how long from when.
      let loopFiber = -1
      let parked = false
      const sleeps: Array<{ readonly at: number; readonly ms: number }> = []
      const clock: Clock.Clock = {
        ...test,
        sleep: (duration: Duration.Duration) =>
          Effect.flatMap(Effect.fiberId, (id) => {
            if (id !== loopFiber) return test.sleep(duration)
            sleeps.push({ at: test.currentTimeMillisUnsafe(), ms: Duration.toMillis(duration) })
            parked = true
            return Effect.ensuring(test.sleep(duration), Effect.sync(() => (parked = false)))
          })
      }
      // Fresh instances (not the server's, built from the same layers) with this configuration, on the test clock.
      const context = yield* Layer.build(Layer.fresh(LogWitnessing.layerNoDeps).pipe(
        Layer.provide(Layer.fresh(TransparencyLog.layerNoDeps)),
        Layer.provide([LogRepo.layer, LogKey.layer, WitnessRepo.layer]),
        Layer.provide(config)
      )).pipe(Effect.provideService(Clock.Clock, clock))
      const witnessing = Context.get(context, LogWitnessing)
      yield* Effect.gen(function*() {
        loopFiber = yield* Effect.fiberId
        yield* witnessing.loop(witnessing.witnesses[0]!)
      }).pipe(Effect.provideService(Clock.Clock, clock), Effect.forkScoped)
      const park = until("the loop to sleep", () => parked)

      // t = 0: the first submission; the witness takes 300 ms (test clock) to answer.
      yield* until("the first submission", () => relayed.length === 1)
      expect(relayed[0]!.at).toBe(0)
      yield* test.adjust(300)
      relayed[0]!.pass()
      yield* park
      // Counted from the submission's start: 700 ms left, not a whole interval after its answer.
      expect(sleeps.at(-1)).toEqual({ at: 300, ms: 700 })

      // The log grows at once, but nothing goes before t = 1000 …
      yield* grow
      yield* test.adjust(699)
      expect([relayed.length, parked]).toEqual([1, true])
      // … and at t = 1000 the new checkpoint goes; this one is answered at once.
      yield* test.adjust(1)
      yield* until("the second submission", () => relayed.length === 2)
      expect(relayed[1]!.at).toBe(1_000)
      relayed[1]!.pass()
      yield* park
      expect(sleeps.at(-1)).toEqual({ at: 1_000, ms: 1_000 })

      // t = 2000: nothing new to submit; the loop looks again every 100 ms.
      yield* test.adjust(1_000)
      yield* until("an idle look at the log", () => sleeps.at(-1)!.at === 2_000)
      yield* park
      expect([relayed.length, sleeps.at(-1)]).toEqual([2, { at: 2_000, ms: 100 }])
      // A checkpoint after the quiet spell goes at the first look that sees it (this instance re-reads the latest
      // checkpoint after 200 ms: the server's integrator does not announce to it), the interval being over.
      yield* grow
      yield* test.adjust(100)
      yield* until("a look at the cached checkpoint", () => sleeps.at(-1)!.at === 2_100)
      yield* park
      expect(relayed.length).toBe(2)
      yield* test.adjust(100)
      yield* until("the third submission", () => relayed.length === 3)
      relayed[2]!.pass()
      yield* park
      const starts = relayed.map((r) => r.at)
      expect(starts).toEqual([0, 1_000, 2_200])
      for (let i = 1; i < starts.length; i++) expect(starts[i]! - starts[i - 1]!).toBeGreaterThanOrEqual(interval)
      // Each answer was a valid cosignature, stored: the witness holds the latest checkpoint.
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ cosigned_size: string; last_status: number }>`SELECT cosigned_size::text, last_status FROM log_witnesses`
      expect(rows.map((row) => [Number(row.cosigned_size), row.last_status])).toEqual([[yield* Effect.promise(logSize), 200]])
    })))
  }, 120_000)

  it("on stop, an instance's leases end within the interval: the next instance does not wait out the 15 s of a holder that died mid-turn", async () => {
    await server.run(Effect.gen(function*() {
      const repo = yield* WitnessRepo
      const sql = yield* SqlClient.SqlClient
      // (The server has no witnesses, so it built no WitnessRepo: one over its database.)
      const left = (witness: string) =>
        Effect.map(
          sql<{ left: number | null }>`SELECT extract(epoch FROM lease_until - now())::float8 AS left FROM log_witnesses WHERE witness = ${witness}`,
          (rows) => rows[0]?.left ?? null
        )
      // Two leases of a stopping instance (one just taken, as a turn would hold it mid-submission), one of another.
      for (const witness of ["stop-a", "stop-b"]) expect(Option.isSome(yield* repo.lease(witness, "stopping", [witness], 0))).toBe(true)
      expect(Option.isSome(yield* repo.lease("stop-other", "alive", ["stop-other"], 0))).toBe(true)
      expect(yield* left("stop-a")).toBeGreaterThan(14)
      // A lease already ending sooner than the interval is not lengthened.
      yield* sql`UPDATE log_witnesses SET lease_until = now() + interval '200 milliseconds' WHERE witness = 'stop-b'`
      yield* repo.releaseAll("stopping", interval)
      expect(yield* left("stop-a")).toBeLessThanOrEqual(interval / 1000)
      expect(yield* left("stop-b")).toBeLessThanOrEqual(0.2)
      expect(yield* left("stop-other")).toBeGreaterThan(14)
      yield* sql`DELETE FROM log_witnesses WHERE witness IN ('stop-a', 'stop-b', 'stop-other')`
    }).pipe(Effect.provide(WitnessRepo.layer)))
  })
})
