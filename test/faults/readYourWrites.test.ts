import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { postgresAvailable } from "./service.js"
import { startTwoInstances, type TwoInstances } from "./readYourWrites.js"

/**
 * Read your writes across instances (docs/ARCHITECTURE.md, "Read your writes"): once a PUT answered, no
 * process serves the document from before it. Two instances of two workers each on one PostgreSQL, the
 * second over a slow link (readYourWrites.ts); every trial PUTs a new version on one instance and GETs it on
 * the other (alternating), whose caches were warmed with the version before. With the writer's wait for the
 * other processes' acks removed, 136 of 1,000 trials answered the earlier document (242 with a 25 ms link);
 * with it, none. No wall-clock bound: a slow neighbour delays answers, it cannot make one stale.
 *
 * PV_FAULTS_RYW_TRIALS sets the number of trials (default 1,000).
 */

const trials = Math.max(1, Number(process.env.PV_FAULTS_RYW_TRIALS ?? "1000"))
const lanes = 16

describe.skipIf(!postgresAvailable)("read your writes across instances (postgres, 2 instances × PV_WORKERS=2)", () => {
  let pair: TwoInstances | undefined
  beforeAll(async () => {
    pair = await startTwoInstances()
  }, 180_000)
  afterAll(() => pair?.dispose())

  it(`${trials} PUT-then-GET trials on the other instance: no stale answer`, async () => {
    const { bases, digestOn, put } = pair!
    const stale: Array<string> = []
    await Promise.all(Array.from({ length: lanes }, async (_, lane) => {
      const subject = `DET-V1-RYW-${lane}`
      await put(bases[0]!, subject, 0)
      for (let trial = lane; trial < trials; trial += lanes) {
        const writer = bases[trial % 2]!
        const reader = bases[(trial + 1) % 2]!
        // Warm the reader's workers with the current version: a stale answer needs a cached one.
        await Promise.all([digestOn(reader, subject), digestOn(reader, subject)])
        const written = await put(writer, subject, trial + 1)
        const read = await digestOn(reader, subject)
        if (read !== written.digest) stale.push(`trial ${trial} (${subject})`)
      }
    }))
    expect(stale, `${stale.length} stale answers in ${trials} trials (${pair!.unavailable()} 503s asked again)`).toEqual([])
  }, 300_000)
})
