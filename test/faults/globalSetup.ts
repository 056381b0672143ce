import { existsSync } from "node:fs"
import { compiledMain, prebuiltMain } from "../support/childServer.js"
import { buildDist, finishDist } from "../support/buildDist.js"

/**
 * The fault projects' global setup: every fault test exercises the compiled JavaScript a deployment runs, not
 * the TypeScript sources, so this checkout's dist/ is built once per run (support/buildDist.ts), unless
 * `PV_FAULTS_MAIN` names a build made elsewhere (another commit, say), which the fault suite then runs. The
 * build runs beside the first files; the fault files wait for it (support/distReady.ts).
 */
export default function setup(): (() => Promise<void>) | undefined {
  if (prebuiltMain !== undefined) {
    if (!existsSync(compiledMain)) throw new Error(`PV_FAULTS_MAIN: ${compiledMain} does not exist`)
    console.log(`faults: using the prebuilt ${compiledMain} (no build)`)
    return undefined
  }
  void buildDist()
  return finishDist
}
