import { relative } from "node:path"
import { fileURLToPath } from "node:url"
import { beforeAll } from "vitest"
import { awaitFaultsDone, waitsForFaults } from "./faultsDone.js"

const root = fileURLToPath(new URL("../..", import.meta.url))

/**
 * Setup file of the browser and PGlite projects: under `npm test`, each file but those that may run beside the timed
 * run (the fault groups, then postgres) starts once that has ended (support/faultsDone.ts). The wait has no time-out
 * of its own: the timed run's own end it.
 */
beforeAll(async ({}, suite) => {
  const file = relative(root, (suite.file ?? suite).filepath).replaceAll("\\", "/")
  if (waitsForFaults(file)) await awaitFaultsDone()
}, 3_600_000)
