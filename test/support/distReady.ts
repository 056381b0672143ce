import { awaitDist } from "./buildDist.js"

/**
 * Setup file of the projects whose tests start compiled processes (vitest.config.ts): each file waits for the
 * run's build of dist/ (support/buildDist.ts), which the global setup started beside the first files.
 */
await awaitDist()
