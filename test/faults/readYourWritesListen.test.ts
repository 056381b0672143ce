import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sleep } from "../support/childServer.js"
import { leaseMs } from "../../src/events/ReadLease.js"
import { postgresAvailable } from "./service.js"
import { startTwoInstances, type TwoInstances } from "./readYourWrites.js"

/**
 * Read your writes when a reader loses its LISTEN connection (docs/ARCHITECTURE.md, "Read your writes"): it
 * stops serving from its cache, and a PUT waits at most one lease length for it. The pair of instances of
 * readYourWrites.ts; a file of its own, run alone (vitest.config.ts's "faults-alone"), since the PUT's
 * bound is wall-clock time a neighbour's processes could make late.
 */
describe.skipIf(!postgresAvailable)("read your writes, LISTEN connections killed (postgres, 2 instances × PV_WORKERS=2)", () => {
  let pair: TwoInstances | undefined
  beforeAll(async () => {
    pair = await startTwoInstances()
  }, 180_000)
  afterAll(() => pair?.dispose())

  it("a reader whose LISTEN connection is killed stops serving from its cache; a PUT completes within one lease", async () => {
    const { bases, client, digestOn, put } = pair!
    const subject = "DET-V1-RYW-KILLED"
    let revision = 0
    await put(bases[0]!, subject, revision)
    for (let round = 0; round < 3; round++) {
      await Promise.all([digestOn(bases[1]!, subject), digestOn(bases[1]!, subject)])
      // Every process's LISTEN connection: the writer's too, so no instance hears the change on it.
      const killed = await client.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'"
      )
      expect(killed.rowCount, "the four workers' LISTEN connections").toBeGreaterThanOrEqual(4)
      const written = await put(bases[round % 2]!, subject, ++revision)
      expect(written.ms, "a PUT waits at most one lease length for readers that cannot ack").toBeLessThan(leaseMs + 2_000)
      for (let i = 0; i < 4; i++) expect(await digestOn(bases[(round + 1) % 2]!, subject)).toBe(written.digest)
      // LISTEN back and a renew's fence heard (once a second), so the next round's reader serves from its cache again.
      await sleep(1_500)
    }
  }, 120_000)
})
