import { generateKeyPairSync } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { createConnection, createServer, type Socket } from "node:net"
import { join } from "node:path"
import { Effect, Exit } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { logMonitorCommand } from "../../src/cli/LogMonitor.js"
import { verifyReceiptCommand } from "../../src/cli/VerifyReceipt.js"
import { parsePolicy, verifyEvidence, verifyReceiptBundle } from "../../src/client/index.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { openCheckpoint, peekCheckpoint, signCheckpoint } from "../../src/log/Checkpoint.js"
import { cosignerFromPrivateKey, parseCosignerKey, requireQuorum } from "../../src/log/Cosignature.js"
import { testLogSigningSeed } from "../../src/log/LogKey.js"
import { noteSignerFromPrivateKey, splitNote, verifierKeyOfSigner } from "../../src/log/Note.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { startTestWitness, type TestWitness } from "../support/witness.js"
import { freePort } from "../support/childServer.js"
import { childEnvironment } from "../support/childEnv.js"
import { runEntry } from "../support/spawned.js"

/**
 * The service under witnesses (both real servers in this process, each on its own database): each new
 * checkpoint goes to two witnesses; /log/checkpoint and receipt bundles carry the newest checkpoint
 * both cosigned; the verifiers require the quorum; a second log signing another history with the same
 * key (a split view) is refused by the witnesses and never served as witnessed.
 */

const origin = "localhost/pv-log"
const logKey = privateKeyFromSeed(testLogSigningSeed)
const logVerifierKey = verifierKeyOfSigner(origin, logKey)
const logSigner = noteSignerFromPrivateKey(origin, logKey)
const subject = "DET-V1-WIT-0001"
const scratch = mkdtempSync(join(tmpdir(), "pv-witnessed-"))
const strangerKey = cosignerFromPrivateKey("witness.test/stranger", generateKeyPairSync("ed25519").privateKey).verifierKey

let w1: TestWitness
let w2: TestWitness
let server: TestServer
let writer: string
let reader: string

const configFor = (witnesses: ReadonlyArray<TestWitness>, quorum: number) => ({
  logRateLimitPerMinute: 1_000_000,
  logWitnesses: witnesses.map((w) => ({ url: w.baseUrl, verifierKey: w.verifierKey })),
  logWitnessQuorum: quorum
})

const createReceipt = async (on: TestServer, bearer: string) => {
  const reply = await request(on, "POST", "/api/v1/reliance-receipts", {
    bearer,
    body: {
      tenant_id: "tenant-a",
      organization: "Witnessed Buyers",
      principal: `agent-${Math.random()}`,
      subject_public_id: subject,
      purpose_id: "supplier-onboarding",
      requested_action: "screen",
      claim_scope: ["identity"]
    }
  })
  expect(reply.status, reply.text).toBe(201)
  return reply.body as { receipt_id: string }
}

/** Polls the proof endpoint until the receipt is under a witnessed checkpoint. */
const witnessedBundle = async (on: TestServer, receiptId: string, withinMs = 5_000) => {
  const deadline = Date.now() + withinMs
  for (;;) {
    const reply = await request(on, "GET", `/api/v1/reliance-receipts/${receiptId}/proof`, { bearer: reader })
    if (reply.status === 200) return reply.body as { checkpoint: string }
    expect(reply.status, reply.text).toBe(404)
    if (Date.now() > deadline) throw new Error(`receipt ${receiptId} is not under a witnessed checkpoint within ${withinMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const verifiers = () => [w1, w2].map((w) => {
  const parsed = parseCosignerKey(w.verifierKey)
  if (!parsed.ok) throw new Error(parsed.detail)
  return parsed.value
})

const nowSeconds = () => Math.floor(Date.now() / 1000)

beforeAll(async () => {
  const witnesses = await Promise.all(["w1", "w2"].map((name) => startTestWitness([logVerifierKey], { PV_WITNESS_NAME: `witness.test/${name}` })))
  w1 = witnesses[0]!
  w2 = witnesses[1]!
  server = await startTestServer({ config: configFor([w1, w2], 2) })
  const [writerKey, readerKey, determination] = await Promise.all([
    createKey(server, ["receipt:write", "receipt:read", "trust:read"], { rate_limit_per_minute: 1_000_000 }),
    createKey(server, ["receipt:read", "trust:read"], { rate_limit_per_minute: 1_000_000 }),
    putDetermination(server, subject, determinationBody(Date.now() - DAY_MS))
  ])
  writer = writerKey.api_key
  reader = readerKey.api_key
  expect(determination.status).toBe(201)
}, 180_000)

afterAll(async () => {
  // Each drains on its own (test/support/server.ts, witness.ts): side by side, not one after the other.
  await Promise.all([server?.close(), w1?.close(), w2?.close()])
  rmSync(scratch, { recursive: true, force: true })
})

/**
 * One receipt of the main log under a witnessed checkpoint, made once for the tests that only read a witnessed
 * receipt's evidence (each of which would otherwise wait up to a witness interval for a receipt of its own).
 */
let shared: Promise<{ readonly receipt: { receipt_id: string }; readonly bundle: { checkpoint: string } }> | undefined
const witnessedReceipt = () =>
  (shared ??= createReceipt(server, writer).then(async (receipt) => ({ receipt, bundle: await witnessedBundle(server, receipt.receipt_id) })))

describe("the log under two witnesses (quorum 2)", () => {
  it("a receipt's bundle carries a checkpoint both witnesses cosigned, within 3 s of its acknowledgment", async () => {
    const started = Date.now()
    const receipt = await createReceipt(server, writer)
    const bundle = await witnessedBundle(server, receipt.receipt_id, 3_000)
    console.log(`acknowledgment → witnessed bundle: ${Date.now() - started} ms`)
    expect(requireQuorum(bundle.checkpoint, verifiers(), 2, nowSeconds()).ok).toBe(true)
    const verdict = verifyReceiptBundle(bundle, { verifierKey: logVerifierKey, witnesses: [w1.verifierKey, w2.verifierKey], quorum: 2 })
    expect(verdict.steps.map((s) => [s.step, s.ok])).toContainEqual(["witness_cosignatures", true])
    expect(verdict.failed_step).toBeUndefined()
  })

  it("a receipt's tlog-proof carries the witnessed checkpoint and verifies with both witnesses pinned; its COSE forms cannot show cosignatures", async () => {
    const { receipt } = await witnessedReceipt()
    const fetched = async (format: string) =>
      new Uint8Array(await (await fetch(`${server.baseUrl}/api/v1/reliance-receipts/${receipt.receipt_id}/${format}`, { headers: { authorization: `Bearer ${reader}` } })).arrayBuffer())
    const tlog = await fetched("tlog-proof")
    const witnessed = { verifierKey: logVerifierKey, witnesses: [w1.verifierKey, w2.verifierKey], quorum: 2, receipt }
    const verdict = verifyEvidence(tlog, witnessed)
    expect(verdict.steps.map((s) => [s.step, s.ok])).toContainEqual(["witness_cosignatures", true])
    expect(verdict.ok).toBe(true)
    expect(verifyEvidence(tlog, { ...witnessed, witnesses: [w1.verifierKey, strangerKey] }).failed_step).toBe("witness_cosignatures")
    expect(verifyEvidence(await fetched("cose-receipt"), witnessed).failed_step).toBe("witness_cosignatures")
  })

  it("/log/checkpoint is the log's signed note with the cosignature lines after the log's own line", async () => {
    const reply = await request(server, "GET", "/log/checkpoint")
    expect(reply.status).toBe(200)
    expect(openCheckpoint(reply.text, logVerifierKey).ok).toBe(true)
    const split = splitNote(reply.text)
    expect(split.ok && split.value.signatures.map((s) => s.name)).toEqual([origin, "witness.test/w1", "witness.test/w2"])
    expect(requireQuorum(reply.text, verifiers(), 2, nowSeconds()).ok).toBe(true)
    // The log's own note comes first, unchanged: text, blank line, the log's signature line.
    const peeked = peekCheckpoint(reply.text)
    if (!peeked.ok) throw new Error(peeked.detail)
    expect(reply.text.startsWith(signCheckpoint(peeked.value, logSigner))).toBe(true)
  })

  it("GET /log/policy (and /api/v1/log/policy) is the deployment's C2SP tlog-policy: the log, both witnesses with their URLs, all of them", async () => {
    const expected = `log ${logVerifierKey}\n` +
      `witness witness.test/w1 ${w1.verifierKey} ${w1.baseUrl}\nwitness witness.test/w2 ${w2.verifierKey} ${w2.baseUrl}\n` +
      "group quorum all witness.test/w1 witness.test/w2\nquorum quorum\n"
    for (const path of ["/log/policy", "/api/v1/log/policy"]) {
      const reply = await request(server, "GET", path, { headers: { origin: "https://elsewhere.example" } })
      expect(reply.status, reply.text).toBe(200)
      expect(reply.headers.get("content-type")).toBe("text/plain; charset=utf-8")
      expect(reply.headers.get("access-control-allow-origin")).toBe("*")
      expect(reply.text).toBe(expected)
    }
    const parsed = parsePolicy(expected)
    expect(parsed.ok && parsed.value.quorum).toBe("quorum")
  })

  it("pv verify-receipt and pv log monitor take the policy (--policy FILE): it pins the log key and requires its quorum", async () => {
    const policyText = (await request(server, "GET", "/log/policy")).text
    const policy = join(scratch, "policy.txt")
    writeFileSync(policy, policyText)
    const file = join(scratch, "bundle-policy.json")
    writeFileSync(file, JSON.stringify((await witnessedReceipt()).bundle))
    const ok = await Effect.runPromise(verifyReceiptCommand({ file, policy }))
    expect(ok.ok).toBe(true)
    expect("keys" in ok && ok.keys.verifier_key).toBe("pinned")
    expect(ok.steps.find((s) => s.step === "witness_cosignatures")?.detail).toMatch(/2 of the policy's 2 witnesses cosigned the checkpoint \(witness\.test\/w1, witness\.test\/w2\)/)
    // The CLI, as a child process: the same verdict from the file.
    const cli = await runEntry(["src/cli/main.ts", "verify-receipt", file, "--policy", policy], childEnvironment({}))
    expect(cli.status, cli.stderr).toBe(0)
    expect(cli.stdout).toMatch(/✓ witness_cosignatures: 2 of the policy's 2 witnesses/)
    // A policy naming a witness that did not cosign: the step fails.
    const stranger = join(scratch, "stranger-policy.txt")
    writeFileSync(stranger, `log ${logVerifierKey}\nwitness W1 ${w1.verifierKey}\nwitness S ${strangerKey}\ngroup both all W1 S\nquorum both\n`)
    const short = await Effect.runPromiseExit(verifyReceiptCommand({ file, policy: stranger }))
    expect(Exit.isFailure(short) && JSON.stringify(short.cause)).toMatch(/FAILED at step witness_cosignatures: the policy's quorum is not met: 1 of the policy's 2 witnesses/)
    const state = join(scratch, "monitor-policy.json")
    const first = await Effect.runPromise(logMonitorCommand({ baseUrl: server.baseUrl, state, policy: policyText }))
    expect(first.size).toBeGreaterThan(0)
    const refused = await Effect.runPromiseExit(logMonitorCommand({ baseUrl: server.baseUrl, state, policy: readFileSync(stranger, "utf8") }))
    expect(Exit.isFailure(refused) && JSON.stringify(refused.cause)).toMatch(/witness_quorum/)
  })

  it("a witness key given twice counts once toward the quorum", async () => {
    const { bundle } = await witnessedReceipt()
    const twice = verifyReceiptBundle(bundle, { verifierKey: logVerifierKey, witnesses: [w1.verifierKey, w1.verifierKey], quorum: 2 })
    expect(twice.failed_step).toBe("witness_cosignatures")
    expect(twice.steps.find((s) => s.step === "witness_cosignatures")?.detail).toMatch(/not between 1 and the 1 distinct pinned witness/)
    const bothAndRepeat = verifyReceiptBundle(bundle, { verifierKey: logVerifierKey, witnesses: [w1.verifierKey, w2.verifierKey, w1.verifierKey] })
    expect(bothAndRepeat.ok).toBe(true)
    expect(bothAndRepeat.steps.find((s) => s.step === "witness_cosignatures")?.detail).toMatch(/2 of 2 pinned witnesses/)
  })

  it("pv verify-receipt with --witness/--quorum passes, and fails naming the step when the quorum is not met", async () => {
    const file = join(scratch, "bundle.json")
    writeFileSync(file, JSON.stringify((await witnessedReceipt()).bundle))
    const ok = await Effect.runPromise(verifyReceiptCommand({ file, verifierKey: logVerifierKey, witnesses: [w1.verifierKey, w2.verifierKey], quorum: 2 }))
    expect(ok.ok).toBe(true)
    const short = await Effect.runPromiseExit(verifyReceiptCommand({ file, verifierKey: logVerifierKey, witnesses: [w1.verifierKey, strangerKey], quorum: 2 }))
    expect(Exit.isFailure(short) && JSON.stringify(short.cause)).toMatch(/FAILED at step witness_cosignatures: 1 of the 2 pinned witnesses/)
    const one = await Effect.runPromise(verifyReceiptCommand({ file, verifierKey: logVerifierKey, witnesses: [w1.verifierKey, strangerKey], quorum: 1 }))
    expect(one.ok).toBe(true)
  })

  it("pv log monitor with --witness/--quorum accepts the witnessed checkpoints, and fails when the quorum is not met", async () => {
    const state = join(scratch, "monitor.json")
    const first = await Effect.runPromise(logMonitorCommand({ baseUrl: server.baseUrl, state, verifierKey: logVerifierKey, witnesses: [w1.verifierKey, w2.verifierKey] }))
    const receipt = await createReceipt(server, writer)
    await witnessedBundle(server, receipt.receipt_id)
    const second = await Effect.runPromise(logMonitorCommand({ baseUrl: server.baseUrl, state, verifierKey: logVerifierKey, witnesses: [w1.verifierKey, w2.verifierKey], quorum: 2 }))
    expect(second.size).toBeGreaterThan(first.size)
    const refused = await Effect.runPromiseExit(logMonitorCommand({ baseUrl: server.baseUrl, state, verifierKey: logVerifierKey, witnesses: [w1.verifierKey, strangerKey] }))
    expect(Exit.isFailure(refused) && JSON.stringify(refused.cause)).toMatch(/witness_quorum/)
    // Given their URLs, it also asks each witness for the checkpoint it last cosigned, and checks it against the log's.
    const asked = await Effect.runPromise(logMonitorCommand({
      baseUrl: server.baseUrl,
      state,
      verifierKey: logVerifierKey,
      witnesses: [`${w1.baseUrl}=${w1.verifierKey}`, `${w2.baseUrl}=${w2.verifierKey}`]
    }))
    expect(asked.size).toBeGreaterThanOrEqual(second.size)
  })

  it("pv log monitor catches a witness that was shown another history (a split view) through the witness's monitoring checkpoint", async () => {
    const w3 = await startTestWitness([logVerifierKey], { PV_WITNESS_NAME: "witness.test/w3" })
    const forked = await startTestServer({ config: configFor([w3], 1) })
    try {
      const forkWriter = (await createKey(forked, ["receipt:write", "receipt:read", "trust:read"], { rate_limit_per_minute: 1_000_000 })).api_key
      expect((await putDetermination(forked, subject, determinationBody(Date.now() - 3 * DAY_MS))).status).toBe(201)
      const receipt = await createReceipt(forked, forkWriter)
      const deadline = Date.now() + 5_000
      // Wait until w3 cosigned the forked history.
      for (;;) {
        const reply = await request(forked, "GET", `/api/v1/reliance-receipts/${receipt.receipt_id}/proof`, { bearer: forkWriter })
        if (reply.status === 200) break
        if (Date.now() > deadline) throw new Error("the forked log was not witnessed by w3")
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      const state = join(scratch, "monitor-split.json")
      const outcome = await Effect.runPromiseExit(logMonitorCommand({
        baseUrl: server.baseUrl,
        state,
        verifierKey: logVerifierKey,
        witnesses: [`${w1.baseUrl}=${w1.verifierKey}`, `${w2.baseUrl}=${w2.verifierKey}`, `${w3.baseUrl}=${w3.verifierKey}`],
        quorum: 2
      }))
      expect(Exit.isFailure(outcome) && JSON.stringify(outcome.cause)).toMatch(/FORK: .*witness http:\/\/127\.0\.0\.1:\d+/)
    } finally {
      await Promise.all([forked.close(), w3.close()])
    }
  })

  it("a cosignature dated more than 60 s ahead is refused by the verifiers", async () => {
    w2.clock.advance(5 * 60_000)
    try {
      const receipt = await createReceipt(server, writer)
      const bundle = await witnessedBundle(server, receipt.receipt_id)
      const verdict = verifyReceiptBundle(bundle, { verifierKey: logVerifierKey, witnesses: [w1.verifierKey, w2.verifierKey], quorum: 2 })
      expect(verdict.failed_step).toBe("witness_cosignatures")
      expect(verdict.steps.find((s) => s.step === "witness_cosignatures")?.detail).toMatch(/in the future/)
    } finally {
      w2.clock.advance(-5 * 60_000)
    }
  })

  it("a checkpoint signed with the log's real key but inconsistent with what a witness cosigned is refused (409 same size, 422 larger)", async () => {
    const served = peekCheckpoint((await request(server, "GET", "/log/checkpoint")).text)
    if (!served.ok) throw new Error(served.detail)
    const held = await fetch(`${w1.baseUrl}/add-checkpoint`, { method: "POST", body: `old 0\n\n${signCheckpoint(served.value, logSigner)}` })
    const size = Number((await held.text()).trim())
    expect(held.status).toBe(409)
    const forkedRoot = Buffer.alloc(32, 0xab)
    const sameSize = signCheckpoint({ origin, size, root: forkedRoot, extensions: [] }, logSigner)
    const same = await fetch(`${w1.baseUrl}/add-checkpoint`, { method: "POST", body: `old ${size}\n\n${sameSize}` })
    expect([same.status, same.headers.get("content-type"), await same.text()]).toEqual([409, "text/x.tlog.size", `${size}\n`])
    const larger = signCheckpoint({ origin, size: size + 5, root: forkedRoot, extensions: [] }, logSigner)
    const bad = await fetch(`${w1.baseUrl}/add-checkpoint`, { method: "POST", body: `old ${size}\n${Buffer.alloc(32, 1).toString("base64")}\n\n${larger}` })
    expect(bad.status).toBe(422)
  })

  it("submissions to a witness reuse one kept-alive connection, one checkpoint after the other", async () => {
    // A fresh witness (its own history) behind a relay that counts the TCP connections the service opens.
    const fresh = await startTestWitness([logVerifierKey], { PV_WITNESS_NAME: "witness.test/kept-alive" })
    const sockets: Array<Socket> = []
    let connections = 0
    const relay = createServer((client) => {
      connections++
      const upstream = createConnection(Number(new URL(fresh.baseUrl).port), "127.0.0.1")
      sockets.push(client, upstream)
      client.pipe(upstream).pipe(client)
      client.on("error", () => upstream.destroy())
      upstream.on("error", () => client.destroy())
    })
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve))
    const port = (relay.address() as { port: number }).port
    // Submissions every 200 ms instead of every second: the three checkpoints come sooner, each still submitted
    // after the one before was answered, over a connection idle in between.
    const other = await startTestServer({ config: { ...configFor([{ ...fresh, baseUrl: `http://127.0.0.1:${port}` }], 1), logWitnessIntervalMs: 200 } })
    try {
      const otherWriter = (await createKey(other, ["receipt:write", "receipt:read", "trust:read"], { rate_limit_per_minute: 1_000_000 })).api_key
      expect((await putDetermination(other, subject, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
      const sizes = new Set<number>()
      for (let i = 0; i < 3; i++) {
        const receipt = await createReceipt(other, otherWriter)
        const deadline = Date.now() + 5_000
        let reply = await request(other, "GET", `/api/v1/reliance-receipts/${receipt.receipt_id}/proof`, { bearer: otherWriter })
        while (reply.status !== 200 && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 25))
          reply = await request(other, "GET", `/api/v1/reliance-receipts/${receipt.receipt_id}/proof`, { bearer: otherWriter })
        }
        expect(reply.status, reply.text).toBe(200)
        const served = peekCheckpoint((reply.body as { checkpoint: string }).checkpoint)
        if (served.ok) sizes.add(served.value.size)
      }
      // Three witnessed checkpoints of growing sizes, each one submission at least, all over one connection.
      expect(sizes.size).toBe(3)
      const metrics = await (await fetch(`${other.baseUrl}/metrics`)).text()
      const answered = metrics.split("\n").filter((l) => l.startsWith("pv_log_witness_submissions_total") && l.includes('answer="200"'))
        .reduce((total, l) => total + Number(l.split(" ").at(-1)), 0)
      expect(answered).toBeGreaterThanOrEqual(3)
      expect(connections).toBe(1)
    } finally {
      await Promise.all([other.close(), fresh.close()])
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => relay.close(resolve))
    }
  })

  it("a witness that is down changes nothing with quorum 1 of 2; with quorum 2 of 2 nothing is served as witnessed and the lag shows", async () => {
    // Another log with this key is another history to w1 and w2: each run here gets a witness of its own, and
    // the two runs (each its own witness and server) go side by side.
    const down = { baseUrl: `http://127.0.0.1:${await freePort()}`, verifierKey: strangerKey } as TestWitness
    await Promise.all([1, 2].map(async (quorum) => {
      const fresh = await startTestWitness([logVerifierKey], { PV_WITNESS_NAME: "witness.test/fresh" })
      const other = await startTestServer({ config: configFor([fresh, down], quorum) })
      try {
        const otherWriter = (await createKey(other, ["receipt:write", "receipt:read", "trust:read"], { rate_limit_per_minute: 1_000_000 })).api_key
        expect((await putDetermination(other, subject, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
        const receipt = await createReceipt(other, otherWriter)
        const proof = async () => request(other, "GET", `/api/v1/reliance-receipts/${receipt.receipt_id}/proof`, { bearer: otherWriter })
        if (quorum === 1) {
          const deadline = Date.now() + 3_000
          let reply = await proof()
          while (reply.status !== 200 && Date.now() < deadline) {
            await new Promise((resolve) => setTimeout(resolve, 25))
            reply = await proof()
          }
          expect(reply.status, reply.text).toBe(200)
          const freshKey = parseCosignerKey(fresh.verifierKey)
          expect(freshKey.ok && requireQuorum(reply.body.checkpoint, [freshKey.value], 1, nowSeconds()).ok).toBe(true)
        } else {
          // Until the witness that answers has cosigned a checkpoint covering the receipt (its line stored: a
          // quorum of 1 would serve the proof now) and the one that is down has failed a submission.
          const cosignedRows = () =>
            other.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ count: string }>`
              SELECT count(*)::text AS count FROM log_cosignatures c
              JOIN log_entries e ON e.kind = 'receipt' AND e.ref = ${receipt.receipt_id}
              WHERE c.tree_size > e.idx`))
          const deadline = Date.now() + 5_000
          let metrics = ""
          for (;;) {
            metrics = await (await fetch(`${other.baseUrl}/metrics`)).text()
            const failed = /pv_log_witness_submissions_total\{[^}]*answer="error"[^}]*\} [1-9]/.test(metrics)
            if (failed && Number((await cosignedRows())[0]!.count) > 0) break
            if (Date.now() > deadline) throw new Error(`the answering witness did not cosign, or the one down was not tried, within 5 s:\n${metrics}`)
            await new Promise((resolve) => setTimeout(resolve, 25))
          }
          expect((await proof()).status).toBe(404)
          for (const format of ["tlog-proof", "cose-receipt", "transparent-statement"]) {
            const early = await request(other, "GET", `/api/v1/reliance-receipts/${receipt.receipt_id}/${format}`, { bearer: otherWriter })
            expect(early.status, format).toBe(404)
            expect(early.body.code, format).toBe("not-yet-logged")
            expect(early.headers.get("retry-after"), format).toBe("1")
          }
          expect((await request(other, "GET", "/log/checkpoint")).status).toBe(404)
          metrics = await (await fetch(`${other.baseUrl}/metrics`)).text()
          expect(metrics).toMatch(/pv_log_witness_lag_entries(\{[^}]*\})? [1-9]/)
          expect(metrics).toMatch(/pv_log_witness_submissions_total\{[^}]*answer="error"[^}]*\} [1-9]/)
          expect((await request(other, "GET", "/readyz")).status).toBe(200)
        }
      } finally {
        await Promise.all([other.close(), fresh.close()])
      }
    }))
  })

  it("a second log with the same key and another history (a split view) is refused and never served as witnessed; /readyz stays 200", async () => {
    const metricsBefore = await (await fetch(`${server.baseUrl}/metrics`)).text()
    const forked = await startTestServer({ config: configFor([w1, w2], 2) })
    try {
      const forkWriter = (await createKey(forked, ["receipt:write", "receipt:read", "trust:read"], { rate_limit_per_minute: 1_000_000 })).api_key
      expect((await putDetermination(forked, subject, determinationBody(Date.now() - 2 * DAY_MS))).status).toBe(201)
      // Larger than what the witnesses hold of the real log: they ask for a proof from their size (409), and
      // the forked tree's proof from it does not lead to the root they cosigned (422).
      for (let i = 0; i < 12; i++) await createReceipt(forked, forkWriter)
      const refusedWith422 = (text: string, name: string) =>
        new RegExp(`pv_log_witness_refusals_total\\{(?=[^}]*witness="${name.replace(/[./]/g, "\\$&")}")(?=[^}]*answer="422")[^}]*\\} [1-9]`).test(text)
      const deadline = Date.now() + 5_000
      let metrics = ""
      while (Date.now() < deadline) {
        metrics = await (await fetch(`${forked.baseUrl}/metrics`)).text()
        if (refusedWith422(metrics, "witness.test/w1") && refusedWith422(metrics, "witness.test/w2")) break
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      // None for these witnesses before (the registry is the process's: another file's witnesses may have some).
      expect(refusedWith422(metricsBefore, "witness.test/w1") || refusedWith422(metricsBefore, "witness.test/w2")).toBe(false)
      expect(refusedWith422(metrics, "witness.test/w1"), metrics.split("\n").filter((l) => l.includes("witness")).join("\n")).toBe(true)
      expect(refusedWith422(metrics, "witness.test/w2")).toBe(true)
      const checkpoint = await request(forked, "GET", "/log/checkpoint")
      expect(checkpoint.status).toBe(404)
      expect(checkpoint.text).toMatch(/quorum of its witnesses/)
      expect((await request(forked, "GET", "/readyz")).status).toBe(200)
      // The real log goes on being witnessed.
      const receipt = await createReceipt(server, writer)
      expect(requireQuorum((await witnessedBundle(server, receipt.receipt_id)).checkpoint, verifiers(), 2, nowSeconds()).ok).toBe(true)
    } finally {
      await forked.close()
    }
  })

  it.runIf(process.env.PV_TEST_DB === "postgres")("two instances on one database share the witnesses through rows: both serve witnessed checkpoints", async () => {
    const second = await startTestServer({ databaseUrl: server.databaseUrl!, config: configFor([w1, w2], 2) })
    try {
      const receipts = []
      for (let i = 0; i < 6; i++) receipts.push(await createReceipt(i % 2 === 0 ? server : second, writer))
      for (const [i, receipt] of receipts.entries()) {
        const bundle = await witnessedBundle(i % 2 === 0 ? second : server, receipt.receipt_id)
        expect(requireQuorum(bundle.checkpoint, verifiers(), 2, nowSeconds()).ok).toBe(true)
      }
      const rows = await server.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ witness: string; cosigned_size: string; last_status: number }>`SELECT witness, cosigned_size::text, last_status FROM log_witnesses ORDER BY witness`))
      expect(rows.map((row) => row.witness).sort()).toEqual([w1.verifierKey, w2.verifierKey].sort())
      for (const row of rows) expect([row.last_status, Number(row.cosigned_size) > 0]).toEqual([200, true])
    } finally {
      await second.close()
    }
    // Cosignatures of the latest checkpoint lost (an instance died between the witnesses' answers and the
    // store): a new instance finds each witness holding that size without a stored line, and has it cosigned again.
    const run = <A>(statement: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
      server.run(Effect.flatMap(SqlClient.SqlClient, statement) as Effect.Effect<A, unknown, never>)
    const latest = (await run((sql) => sql<{ latest: string }>`SELECT max(tree_size)::text AS latest FROM log_checkpoints`))[0]!.latest
    await run((sql) => sql`DELETE FROM log_cosignatures WHERE tree_size = ${BigInt(latest)}`)
    const third = await startTestServer({ databaseUrl: server.databaseUrl!, config: configFor([w1, w2], 2) })
    try {
      const deadline = Date.now() + 5_000
      let served = peekCheckpoint((await request(third, "GET", "/log/checkpoint")).text)
      while ((!served.ok || served.value.size !== Number(latest)) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50))
        served = peekCheckpoint((await request(third, "GET", "/log/checkpoint")).text)
      }
      expect(served.ok && served.value.size).toBe(Number(latest))
      const stored = await run((sql) => sql<{ count: string }>`SELECT count(*)::text AS count FROM log_cosignatures WHERE tree_size = ${BigInt(latest)}`)
      expect(stored[0]!.count).toBe("2")
    } finally {
      await third.close()
    }
  })
})
