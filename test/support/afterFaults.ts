import { awaitFaultsDone } from "./faultsDone.js"

/** Setup file of the browser and PGlite projects: under `npm test`, each file starts once the fault groups have ended (support/faultsDone.ts). */
await awaitFaultsDone()
