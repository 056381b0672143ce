import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const projectRoot = fileURLToPath(new URL("../..", import.meta.url))

/**
 * Builds this checkout's dist/ (`npm run -s build`, what `npm start` runs before `node dist/src/main.js`) once
 * per vitest run: vitest runs the projects' global setups one after the other in its own process, so the
 * later ones find the first one's mark and build nothing. (In watch mode the setups run once per start of
 * vitest: restart it after changing the sources, or children run the earlier build.)
 */
export const buildDist = (): void => {
  if (process.env.PV_DIST_BUILT === projectRoot) return
  const started = Date.now()
  const npm = process.platform === "win32" ? "npm.cmd" : "npm"
  const build = spawnSync(npm, ["run", "-s", "build"], { cwd: projectRoot, encoding: "utf8" })
  if (build.status !== 0) {
    throw new Error(`npm run -s build failed (exit ${build.status}):\n${build.stdout}\n${build.stderr}`)
  }
  if (!existsSync(join(projectRoot, "dist", "src", "main.js")) || !existsSync(join(projectRoot, "dist", "policy"))) {
    throw new Error("the build did not produce dist/src/main.js and dist/policy")
  }
  process.env.PV_DIST_BUILT = projectRoot
  console.log(`tests: built dist/ in ${Date.now() - started} ms`)
}

/**
 * The global setup of the HTTP projects (vitest.config.ts), whose tests start compiled processes of this
 * checkout (second instances, `pv` children: test/support/spawned.ts), whatever PV_FAULTS_MAIN says.
 */
export default function setup(): void {
  buildDist()
}
