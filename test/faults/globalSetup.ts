import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { compiledMain, prebuiltMain, projectRoot } from "../support/childServer.js"

/**
 * Builds the service once (`npm run -s build`, what `npm start` runs before `node dist/src/main.js`), so
 * every fault test exercises the compiled JavaScript a deployment runs, not the TypeScript sources.
 */
export default function setup(): void {
  // The fault and HTTP projects (vitest.config.ts) name this setup; vitest runs the projects' setups one after
  // the other in its own process, so the later ones find the first one's mark and build nothing.
  if (process.env.PV_FAULTS_BUILT === compiledMain) return
  if (prebuiltMain !== undefined) {
    if (!existsSync(compiledMain)) throw new Error(`PV_FAULTS_MAIN: ${compiledMain} does not exist`)
    console.log(`faults: using the prebuilt ${compiledMain} (no build)`)
    return
  }
  const started = Date.now()
  const npm = process.platform === "win32" ? "npm.cmd" : "npm"
  const build = spawnSync(npm, ["run", "-s", "build"], { cwd: projectRoot, encoding: "utf8" })
  if (build.status !== 0) {
    throw new Error(`npm run -s build failed (exit ${build.status}):\n${build.stdout}\n${build.stderr}`)
  }
  if (!existsSync(compiledMain) || !existsSync(join(projectRoot, "dist", "policy"))) {
    throw new Error(`the build did not produce ${compiledMain} and dist/policy`)
  }
  process.env.PV_FAULTS_BUILT = compiledMain
  console.log(`faults: built dist/ in ${Date.now() - started} ms`)
}
