import { createServer } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyReceiptBundle } from "../../src/client/index.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { cosignerFromPrivateKey } from "../../src/log/Cosignature.js"
import { testLogSigningSeed } from "../../src/log/LogKey.js"
import { verifierKeyOfSigner } from "../../src/log/Note.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { startTestWitness, type TestWitness } from "../support/witness.js"

/**
 * POST /reliance-receipts with `Prefer: wait=<1-10>` (docs/API.md, "Evidence in one round trip"): the receipt
 * with its proof bundle and Preference-Applied once the entry is under a served checkpoint; without the
 * header, or with one that is not a valid wait, the plain answer; with a witness quorum that cannot be met,
 * the plain answer once the wait has run out.
 */

const kind = process.env.PV_TEST_DB ?? "pglite"
const subject = "DET-V1-WAIT-0001"
const pinnedVerifierKey = verifierKeyOfSigner("localhost/pv-log", privateKeyFromSeed(testLogSigningSeed))
let server: TestServer
let witnessed: TestServer | undefined
let witness: TestWitness | undefined
let writer: string
let jwks: any
let principal = 0

const body = (tenant = "tenant-a") => ({
  tenant_id: tenant,
  organization: "Waiting Buyers",
  principal: `agent-${principal++}`,
  subject_public_id: subject,
  purpose_id: "supplier-onboarding",
  requested_action: "screen",
  claim_scope: ["identity"]
})

const post = (on: TestServer, key: string, payload: unknown, prefer?: string) =>
  request(on, "POST", "/api/v1/reliance-receipts", { bearer: key, body: payload, ...(prefer === undefined ? {} : { headers: { prefer } }) })

const setUp = async (on: TestServer) => {
  const key = (await createKey(on, ["receipt:write", "receipt:read"], { rate_limit_per_minute: 1_000_000 })).api_key
  const put = await putDetermination(on, subject, determinationBody(Date.now() - DAY_MS))
  expect([200, 201], put.text).toContain(put.status)
  return key
}

/** A loopback port nothing listens on: a witness that is down. */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer()
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })

beforeAll(async () => {
  server = await startTestServer({ config: { logRateLimitPerMinute: 1_000_000 } })
  writer = await setUp(server)
  jwks = (await request(server, "GET", "/api/v1/events/keys")).body
})

afterAll(async () => {
  await server?.close()
  await witnessed?.close()
  await witness?.close()
})

describe(`Prefer: wait on POST /reliance-receipts (${kind})`, () => {
  it("answers 201 with the proof bundle (verifying with pinned keys) and Preference-Applied", async () => {
    const reply = await post(server, writer, body(), "wait=5")
    expect(reply.status, reply.text).toBe(201)
    expect(reply.headers.get("preference-applied")).toBe("wait=5")
    const { proof, ...receipt } = reply.body
    expect(receipt.idempotent).toBe(false)
    expect(proof).toBeDefined()
    const { idempotent: _, ...stored } = receipt
    expect(proof.receipt).toEqual(stored)
    expect(verifyReceiptBundle(proof, { verifierKey: pinnedVerifierKey, receiptKeys: jwks })).toMatchObject({ ok: true })
    // The very bundle GET …/proof serves for that checkpoint.
    const served = await request(server, "GET", `/api/v1/reliance-receipts/${receipt.receipt_id}/proof`, { bearer: writer })
    expect(served.status, served.text).toBe(200)
    expect(served.body.receipt).toEqual(proof.receipt)
    expect(served.body.leaf_index).toBe(proof.leaf_index)
  })

  it("answers a replay 200 with the proof bundle", async () => {
    const payload = body()
    const first = await post(server, writer, payload)
    expect(first.status, first.text).toBe(201)
    const replay = await post(server, writer, payload, "respond-async, wait=3")
    expect(replay.status, replay.text).toBe(200)
    expect(replay.headers.get("preference-applied")).toBe("wait=3")
    expect(replay.body.idempotent).toBe(true)
    expect(replay.body.receipt_id).toBe(first.body.receipt_id)
    expect(replay.body.proof.receipt.receipt_id).toBe(first.body.receipt_id)
    expect(verifyReceiptBundle(replay.body.proof, { verifierKey: pinnedVerifierKey, receiptKeys: jwks }).ok).toBe(true)
    // The plain replay after it is unchanged: no proof, no Preference-Applied.
    const plain = await post(server, writer, payload)
    expect(plain.status).toBe(200)
    expect(plain.body.proof).toBeUndefined()
    expect(plain.headers.get("preference-applied")).toBeNull()
  })

  it("without the header answers as before: no proof, no Preference-Applied", async () => {
    const reply = await post(server, writer, body())
    expect(reply.status, reply.text).toBe(201)
    expect(reply.body.proof).toBeUndefined()
    expect(reply.headers.get("preference-applied")).toBeNull()
  })

  it("ignores a Prefer it cannot honour (RFC 7240): the plain answer, never an error", async () => {
    for (const prefer of ["wait=0", "wait=11", "wait=-1", "wait=1.5", "wait=abc", "wait", "wait=", ",,;;", "return=minimal", "wait=99999999999999999999"]) {
      const started = Date.now()
      const reply = await post(server, writer, body(), prefer)
      expect(reply.status, `${prefer}: ${reply.text}`).toBe(201)
      expect(reply.body.proof, prefer).toBeUndefined()
      expect(reply.headers.get("preference-applied"), prefer).toBeNull()
      expect(Date.now() - started, prefer).toBeLessThan(900)
    }
  })

  it("with a witness down so the quorum is never met: the answer without proof once the wait has run out (~1 s)", async () => {
    witness = await startTestWitness([pinnedVerifierKey], { PV_WITNESS_NAME: "witness.test/wait" })
    const down = cosignerFromPrivateKey("down.example/w", privateKeyFromSeed(Buffer.alloc(32, 77))).verifierKey
    witnessed = await startTestServer({
      config: {
        logRateLimitPerMinute: 1_000_000,
        logWitnesses: [{ url: witness.baseUrl, verifierKey: witness.verifierKey }, { url: `http://127.0.0.1:${await closedPort()}`, verifierKey: down }],
        logWitnessQuorum: 2
      }
    })
    const key = await setUp(witnessed)
    const started = Date.now()
    const reply = await post(witnessed, key, body(), "wait=1")
    const took = Date.now() - started
    expect(reply.status, reply.text).toBe(201)
    expect(reply.body.proof).toBeUndefined()
    expect(reply.headers.get("preference-applied")).toBeNull()
    expect(took).toBeGreaterThanOrEqual(950)
    expect(took).toBeLessThan(3_000)
    // And GET …/proof agrees: not under a witnessed checkpoint.
    const proof = await request(witnessed, "GET", `/api/v1/reliance-receipts/${reply.body.receipt_id}/proof`, { bearer: key })
    expect(proof.status).toBe(404)
  })

  it("with a quorum the live witness meets: the proof carries its cosignature and verifies against it", async () => {
    const down = cosignerFromPrivateKey("down.example/w", privateKeyFromSeed(Buffer.alloc(32, 77))).verifierKey
    // A witness of its own: this server's log shares the test origin and key with the other's, a different tree.
    const live = await startTestWitness([pinnedVerifierKey], { PV_WITNESS_NAME: "witness.test/live" })
    const quorumOne = await startTestServer({
      config: {
        logRateLimitPerMinute: 1_000_000,
        logWitnesses: [{ url: live.baseUrl, verifierKey: live.verifierKey }, { url: `http://127.0.0.1:${await closedPort()}`, verifierKey: down }],
        logWitnessQuorum: 1
      }
    })
    try {
      const key = await setUp(quorumOne)
      const keys = (await request(quorumOne, "GET", "/api/v1/events/keys")).body
      const reply = await post(quorumOne, key, body(), "wait=10")
      expect(reply.status, reply.text).toBe(201)
      expect(reply.headers.get("preference-applied")).toBe("wait=10")
      const verdict = verifyReceiptBundle(reply.body.proof, { verifierKey: pinnedVerifierKey, receiptKeys: keys, witnesses: [live.verifierKey], quorum: 1 })
      expect(verdict, JSON.stringify(verdict)).toMatchObject({ ok: true })
    } finally {
      await quorumOne.close()
      await live.close()
    }
  })

  it("a drain (SIGTERM) ends a wait at once with the answer without proof", async () => {
    const on = witnessed!
    const key = (await createKey(on, ["receipt:write"], { rate_limit_per_minute: 1_000_000 })).api_key
    const started = Date.now()
    const pending = post(on, key, body(), "wait=10")
    await new Promise((resolve) => setTimeout(resolve, 500))
    const closing = on.close()
    witnessed = undefined
    const reply = await pending
    // The wait ends when the drain starts, not at its 10 s: the bound is on the answer (0.5 s alone and at nice 10
    // beside two busy processes), not on the rest of the server's stop (0.4 s alone, 0.7–0.9 s there; answer and
    // stop together took 6.1 s once in `npm test`, at nice 10 beside the PostgreSQL files).
    const answeredMs = Date.now() - started
    await closing
    expect(reply.status, reply.text).toBe(201)
    expect(reply.body.proof).toBeUndefined()
    expect(reply.headers.get("preference-applied")).toBeNull()
    expect(answeredMs).toBeLessThan(5_000)
  })
})
