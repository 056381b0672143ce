import { existsSync, writeFileSync } from "node:fs"

/**
 * `npm test` (test/run.ts) runs the timed run (the fault groups, then postgres) beside the unit files, and the browser
 * and most PGlite files only after it: those files bound wall-clock time too (a webhook delivered within 2 s of a
 * recovery, an event on the page within a second, a revocation within 2 s), and their servers run at the lower
 * priority of the two runs, so the timed run's busy processes could make them late (beside `postgres` on a slower
 * machine: a healthy delivery 3.2 s after its change against a 3 s bound, ~40 ms alone). PV_TEST_FAULTS_DONE names
 * the file that says the timed run has ended: test/run.ts writes it then, whatever its end.
 */
const marker = process.env.PV_TEST_FAULTS_DONE

/**
 * The PGlite files that may run beside the timed run: requests and answers with no bound in wall-clock time, or
 * only polls of 10 s and more for what the service does within 2 s, and child processes awaited without a bound of
 * their own (checked by reading each; a file not named here waits, so a new one is safe until it is added).
 */
export const besideFaults: ReadonlySet<string> = new Set([
  "test/client/client.http.test.ts",
  "test/http/actionability.http.test.ts",
  "test/http/clientAddress.http.test.ts",
  "test/http/defaults.http.test.ts",
  "test/http/errors.http.test.ts",
  "test/http/events.http.test.ts",
  "test/http/mcp.http.test.ts",
  "test/http/mcp2026.http.test.ts",
  "test/http/openapi.http.test.ts",
  "test/http/operatorToken.http.test.ts",
  "test/http/origin.http.test.ts",
  "test/http/receipts.http.test.ts",
  "test/http/subscriptionStart.http.test.ts",
  "test/http/successSchemas.http.test.ts",
  "test/http/trust.http.test.ts",
  "test/http/trustCache.http.test.ts",
  "test/witness/process.http.test.ts",
  "test/witness/witness.http.test.ts"
])

/** Whether a file of a project that waits (support/afterFaults.ts) must wait, by its path relative to the repository. */
export const waitsForFaults = (file: string): boolean => marker !== undefined && !besideFaults.has(file)

/** Waits for the mark; at once outside `npm test`. */
export const awaitFaultsDone = async (): Promise<void> => {
  if (marker === undefined) return
  while (!existsSync(marker)) await new Promise((resolve) => setTimeout(resolve, 200))
}

/** The mark (idempotent); a no-op outside `npm test`. */
export const markFaultsDone = (): void => {
  if (marker !== undefined && !existsSync(marker)) writeFileSync(marker, "")
}
