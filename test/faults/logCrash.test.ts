import { afterAll, describe, expect, it } from "vitest"
import { verifyCheckpointConsistency } from "../../src/client/index.js"
import { canonicalJson } from "../../src/domain/Canonical.js"
import { openCheckpoint } from "../../src/log/Checkpoint.js"
import { parseEntryBytes, receiptEntryOf } from "../../src/log/Entries.js"
import { hexOf, leafHash, rootOf, subtreeHashesOf } from "../../src/log/Merkle.js"
import { decodeEntryBundle, entryBundlePath, entryBundlesOf } from "../../src/log/Tiles.js"
import { Deployment, sleep } from "../support/childServer.js"
import { databaseKinds, determination, provisionKey, putDetermination, receiptBody } from "./service.js"
import { answer, call, pollUntil } from "./wire.js"

/**
 * docs/API.md §11.3 and §13: `kill -9` of the process that integrates the transparency log, at random
 * moments under continuous receipt writes, then a restart on the same database. Afterwards every
 * checkpoint ever seen is consistent with every later one (the tree never forked), and the tree holds
 * every acknowledged receipt exactly once at gapless indexes (nothing acknowledged was lost).
 */

const subject = "DET-V1-LOGCRASH-0001"
const writers = 8
const rounds = 3

interface Seen {
  readonly note: string
  readonly size: number
  readonly root: string
}

describe.each(databaseKinds)("kill -9 of the log integrator (%s)", (kind) => {
  let deployment: Deployment | undefined
  afterAll(() => deployment?.dispose())

  it(`${rounds} kills under load: every checkpoint seen stays consistent, every acknowledged receipt is in the tree once`, async () => {
    // The watcher polls the checkpoint far above the default per-address log limit.
    deployment = await Deployment.create(kind, { env: { PV_LOG_RATE_LIMIT_PER_MINUTE: "1000000" } })
    let { child, baseUrl } = await deployment.start()
    const key = await provisionKey(baseUrl)
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)
    const verifierKey = (await answer(baseUrl, "GET", "/log/key")).body.verifier_key as string

    const seen = new Map<number, Seen>()
    const forks: Array<string> = []
    const record = (note: string) => {
      const opened = openCheckpoint(note, verifierKey)
      if (!opened.ok) return void forks.push(`a checkpoint does not verify: ${opened.detail}`)
      const checkpoint = { note, size: opened.value.size, root: hexOf(opened.value.root) }
      const earlier = seen.get(checkpoint.size)
      if (earlier !== undefined && earlier.root !== checkpoint.root) forks.push(`two roots for size ${checkpoint.size}`)
      seen.set(checkpoint.size, checkpoint)
    }
    const acknowledged = new Map<string, any>()
    let principal = 0

    for (let round = 1; round <= rounds; round++) {
      let killed = false
      const unexpected: Array<string> = []
      const writer = async () => {
        while (!killed) {
          const outcome = await call(baseUrl, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody(`log-crash-${principal++}`, subject), timeoutMs: 15_000 })
          if (outcome.kind !== "answer") {
            if (!killed) unexpected.push(`receipt create: ${outcome.kind} before the kill`)
            return
          }
          if (outcome.answer.status === 201) acknowledged.set(outcome.answer.body.receipt_id, outcome.answer.body)
          else unexpected.push(`receipt create: ${outcome.answer.status} ${outcome.answer.text.slice(0, 200)}`)
        }
      }
      const watcher = async () => {
        while (!killed) {
          const outcome = await call(baseUrl, "GET", "/log/checkpoint", { timeoutMs: 5_000 })
          if (outcome.kind === "answer" && outcome.answer.status === 200) record(outcome.answer.text)
          await sleep(15)
        }
      }
      const load = Promise.all([...Array.from({ length: writers }, writer), watcher()])
      // Let integration rounds run under load, then kill at a random moment (often inside a round's transaction).
      await sleep(800 + Math.floor(Math.random() * 1_200))
      killed = true
      const exit = await child.kill9()
      expect(exit.signal).toBe("SIGKILL")
      await load
      expect(unexpected, `answers during load (round ${round})`).toEqual([])
      ;({ child, baseUrl } = await deployment.start())
      // A restarted process may answer 503 until its database answers (a crowded machine): only a checkpoint is one.
      const restartedBase = baseUrl
      record(await pollUntil("a checkpoint from the restarted process", 30_000, async () => {
        const reply = await answer(restartedBase, "GET", "/log/checkpoint")
        return reply.status === 200 ? reply.text : undefined
      }, 100))
      console.log(`log kill -9 (${kind}) round ${round}: ${acknowledged.size} receipts acknowledged, ${seen.size} checkpoints seen`)
    }
    expect(forks).toEqual([])

    // Every acknowledged write is integrated soon after the restart.
    const entries = await (async () => {
      const deadline = performance.now() + 10_000
      for (;;) {
        const { text } = await answer(baseUrl, "GET", "/log/checkpoint")
        record(text)
        const opened = openCheckpoint(text, verifierKey)
        if (!opened.ok) throw new Error(opened.detail)
        const size = opened.value.size
        const all: Array<Uint8Array> = []
        for (const bundle of entryBundlesOf(size)) {
          const response = await fetch(`${baseUrl}/log/${entryBundlePath(bundle)}`)
          expect(response.status, entryBundlePath(bundle)).toBe(200)
          const decoded = decodeEntryBundle(new Uint8Array(await response.arrayBuffer()), bundle.width)
          if (!decoded.ok) throw new Error(decoded.detail)
          all.push(...decoded.value)
        }
        const texts = new Set(all.map((entry) => Buffer.from(entry).toString("utf8")))
        if ([...acknowledged.values()].every((receipt) => texts.has(canonicalJson(receiptEntryOf(receipt))))) return all
        if (performance.now() > deadline) throw new Error(`acknowledged receipts are missing from the tree of size ${size}`)
        await sleep(200)
      }
    })()

    // Exactly once: no entry twice, and each acknowledged receipt's entry present.
    const texts = entries.map((entry) => Buffer.from(entry).toString("utf8"))
    expect(new Set(texts).size, "an entry appears twice").toBe(texts.length)
    for (const entry of entries) expect(parseEntryBytes(entry).ok).toBe(true)
    const final = seen.get(entries.length)!
    expect(hexOf(rootOf(entries.length, subtreeHashesOf(entries.map(leafHash)))), "the entries give the final root").toBe(final.root)

    // Every checkpoint seen, across kills, is consistent with the next larger one (hence with every later one).
    const sizes = [...seen.keys()].sort((a, b) => a - b)
    expect(sizes.length).toBeGreaterThan(rounds)
    for (let i = 0; i + 1 < sizes.length; i++) {
      const [older, newer] = [seen.get(sizes[i]!)!, seen.get(sizes[i + 1]!)!]
      const proof = await answer(baseUrl, "GET", `/log/proof/consistency?first=${older.size}&second=${newer.size}`)
      expect(proof.status, proof.text).toBe(200)
      const verdict = verifyCheckpointConsistency(older.note, newer.note, proof.body.consistency_path, verifierKey)
      expect(verdict.ok, `${older.size} → ${newer.size}: ${JSON.stringify(verdict)}`).toBe(true)
    }
    child.signal("SIGTERM")
    await child.waitForExit(15_000).catch(() => undefined)
  })
})
