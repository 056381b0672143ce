import { markFaultsDone } from "./faultsDone.js"

/**
 * Setup file of the PostgreSQL project: under `npm test` its group follows the fault groups (vitest.config.ts), so
 * its first file starting means they have ended (support/faultsDone.ts).
 */
markFaultsDone()
