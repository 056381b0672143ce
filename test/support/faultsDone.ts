import { existsSync, writeFileSync } from "node:fs"

/**
 * `npm test` (test/run.ts) runs the fault groups beside the unit files, and the browser and PGlite files only after
 * them: those files bound wall-clock time too (a webhook delivered within 2 s of a recovery, an event on the page
 * within a second), and their servers run at the lower priority of the two runs, so a fault group's busy processes
 * could make them late. PV_TEST_FAULTS_DONE names the file that says the fault groups have ended: the run of the
 * fault groups writes it when its next group (postgres) starts, and test/run.ts when that run ends.
 */
const marker = process.env.PV_TEST_FAULTS_DONE

/** Setup file of the projects that wait (browser, pglite): each file waits for the mark first. */
export const awaitFaultsDone = async (): Promise<void> => {
  if (marker === undefined) return
  while (!existsSync(marker)) await new Promise((resolve) => setTimeout(resolve, 200))
}

/** The mark (idempotent); a no-op outside `npm test`. */
export const markFaultsDone = (): void => {
  if (marker !== undefined && !existsSync(marker)) writeFileSync(marker, "")
}
