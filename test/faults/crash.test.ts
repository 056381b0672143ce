import { afterAll, describe, expect, it } from "vitest"
import { verifyEventChain } from "../../src/client/index.js"
import { digestOf } from "../../src/domain/Canonical.js"
import { Deployment, sleep } from "../support/childServer.js"
import { databaseKinds, determination, eventChain, eventKeys, provisionKey, putDetermination, receiptBody } from "./service.js"
import { answer, call, describeOutcome, type Outcome } from "./wire.js"

/**
 * docs/API.md §13, crashes: after `kill -9` at any moment and a restart, every write that was
 * acknowledged (2xx) is there unchanged and every chain is gapless and verifies, on PostgreSQL and on the
 * embedded database (docs/API.md §9.3: an acknowledged receipt survives a crash).
 *
 * Load: concurrent receipt creates (a new principal each) and, per determination, one sequential writer
 * of updates that each change a field (so each appends one event). SIGKILL lands at a random moment while
 * all of it runs; then a restart on the same data directory / database, a check, and a second round.
 */

const subjects = ["DET-V1-CRASH-0001", "DET-V1-CRASH-0002", "DET-V1-CRASH-0003", "DET-V1-CRASH-0004"]
const receiptWriters = 8
const rounds = 2

interface Write {
  readonly revision: number
  readonly digest: string
  acknowledged: boolean
}

describe.each(databaseKinds)("kill -9 under mixed write load (%s)", (kind) => {
  let deployment: Deployment | undefined
  afterAll(() => deployment?.dispose())

  it(`${rounds} kills at random moments: acknowledged receipts identical, acknowledged determination versions kept, chains gapless and verified`, async () => {
    deployment = await Deployment.create(kind)
    let { child, baseUrl } = await deployment.start()
    const key = await provisionKey(baseUrl)

    /** Per determination: the writes applied so far, in order, then at most one whose fate is unknown. */
    const history = new Map<string, Array<Write>>()
    for (const subject of subjects) {
      const body = determination(0)
      const reply = await putDetermination(baseUrl, subject, body)
      expect(reply.status, reply.text).toBe(201)
      expect(reply.body.determination_digest, "the local digest recipe matches the server's").toBe(digestOf(body))
      history.set(subject, [{ revision: 0, digest: reply.body.determination_digest, acknowledged: true }])
    }
    const receipts = new Map<string, any>()
    let principal = 0

    for (let round = 1; round <= rounds; round++) {
      let killed = false
      const unexpected: Array<string> = []
      let roundReceipts = 0
      const roundUpdates = new Map<string, number>(subjects.map((s) => [s, 0]))
      // The process's end shows as a reset/refusal; any answer came from before the kill and must be 2xx.
      const check = (what: string, outcome: Outcome): boolean => {
        if (outcome.kind !== "answer") {
          if (!killed) unexpected.push(`${what}: ${describeOutcome(outcome)} before the kill`)
          return false
        }
        if (outcome.answer.status < 200 || outcome.answer.status > 299) unexpected.push(`${what}: ${describeOutcome(outcome)}`)
        return true
      }

      const receiptLoop = async () => {
        while (!killed) {
          const body = receiptBody(`crash-${round}-${principal++}`, subjects[principal % subjects.length]!)
          const outcome = await call(baseUrl, "POST", "/api/v1/reliance-receipts", { bearer: key, body, timeoutMs: 15_000 })
          if (!check("receipt create", outcome)) return
          if (outcome.kind === "answer" && outcome.answer.status === 201) {
            receipts.set(outcome.answer.body.receipt_id, outcome.answer.body)
            roundReceipts++
          }
        }
      }
      const determinationLoop = async (subject: string) => {
        const writes = history.get(subject)!
        while (!killed) {
          const revision = writes[writes.length - 1]!.revision + 1
          const body = determination(revision)
          const write: Write = { revision, digest: digestOf(body), acknowledged: false }
          writes.push(write)
          const outcome = await putDetermination(baseUrl, subject, body, 15_000).then(
            (reply): Outcome => ({ kind: "answer", answer: reply }),
            (error): Outcome => ({ kind: "closed", elapsedMs: 0, detail: String(error) })
          )
          if (!check(`PUT ${subject}`, outcome)) return
          if (outcome.kind === "answer" && outcome.answer.status === 200) {
            expect(outcome.answer.body.determination_digest).toBe(write.digest)
            write.acknowledged = true
            roundUpdates.set(subject, roundUpdates.get(subject)! + 1)
          }
        }
      }
      const load = Promise.all([
        ...Array.from({ length: receiptWriters }, receiptLoop),
        ...subjects.map(determinationLoop)
      ])

      // Kill once the load is really mixed (receipts and every writer acknowledged), at a random moment after.
      const deadline = performance.now() + 30_000
      while (roundReceipts < 20 || [...roundUpdates.values()].some((n) => n < 2)) {
        if (performance.now() > deadline || unexpected.length > 0) break
        await sleep(10)
      }
      expect(unexpected, "answers during load").toEqual([])
      expect(roundReceipts, "receipts acknowledged before the kill").toBeGreaterThanOrEqual(20)
      const delay = Math.floor(Math.random() * 700)
      await sleep(delay)
      killed = true
      const exit = await child.kill9()
      expect(exit.signal).toBe("SIGKILL")
      await load
      expect(unexpected, "answers during load").toEqual([])
      console.log(`kill -9 (${kind}) round ${round}: SIGKILL ${delay} ms after the threshold; ${receipts.size} receipts and ` +
        `${subjects.map((s) => history.get(s)!.filter((w) => w.acknowledged).length).join("/")} determination versions acknowledged so far`)

      ;({ child, baseUrl } = await deployment.start())

      // Every acknowledged receipt: there, and identical (the replay flag aside).
      const missing: Array<string> = []
      const changed: Array<string> = []
      const ids = [...receipts.keys()]
      for (let i = 0; i < ids.length; i += 16) {
        await Promise.all(ids.slice(i, i + 16).map(async (receiptId) => {
          const read = await answer(baseUrl, "GET", `/api/v1/reliance-receipts/${receiptId}`, { bearer: key, timeoutMs: 10_000 })
          if (read.status !== 200) return void missing.push(`${receiptId}: ${read.status} ${read.text.slice(0, 200)}`)
          const { idempotent: _, ...acknowledged } = receipts.get(receiptId)
          try {
            expect(read.body.receipt_digest).toBe(acknowledged.receipt_digest)
            expect(read.body.snapshot_payload).toEqual(acknowledged.snapshot_payload)
            expect(read.body).toEqual(acknowledged)
          } catch (error) {
            changed.push(`${receiptId}: ${String(error).slice(0, 300)}`)
          }
        }))
      }
      expect(missing, `acknowledged receipts missing after kill -9 (round ${round}, ${missing.length} of ${ids.length})`).toEqual([])
      expect(changed, `acknowledged receipts changed after kill -9 (round ${round})`).toEqual([])

      // Every determination: at the last acknowledged version or the one write in flight at the kill;
      // its chain gapless from 1, one event per stored version, verified with the published keys.
      const jwks = await eventKeys(baseUrl)
      for (const subject of subjects) {
        const writes = history.get(subject)!
        const lastAcknowledged = writes.reduce((last, w, i) => (w.acknowledged ? i : last), -1)
        const allowed = writes.slice(lastAcknowledged)
        expect(allowed.length, "one write at most in flight per determination").toBeLessThanOrEqual(2)
        const trust = await answer(baseUrl, "GET", `/api/v1/trust/${subject}/machine`, { bearer: key, timeoutMs: 10_000 })
        expect(trust.status, trust.text).toBe(200)
        const stored = trust.body.determination.determination_digest
        const at = writes.findIndex((w) => w.digest === stored)
        expect(at, `${subject}: stored version is not the last acknowledged one or the one in flight (round ${round})`)
          .toBeGreaterThanOrEqual(lastAcknowledged)
        writes.splice(at + 1)
        writes[at]!.acknowledged = true

        const { events, head } = await eventChain(baseUrl, key, subject)
        const verdict = verifyEventChain(events, jwks, { publicId: subject, head })
        expect(verdict, `${subject}: chain after kill -9 (round ${round})`).toMatchObject({ ok: true })
        expect(events.map((e) => e.sequence)).toEqual(writes.map((_, i) => i + 1))
        expect(events.map((e) => e.type)).toEqual(writes.map((_, i) => (i === 0 ? "determination.recorded" : "determination.updated")))
        expect(trust.body.integrity.event_head).toEqual(head)
      }
    }
    child.signal("SIGTERM")
    await child.waitForExit(15_000).catch(() => undefined)
  })
})
