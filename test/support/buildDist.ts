import { spawn } from "node:child_process"
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const projectRoot = fileURLToPath(new URL("../..", import.meta.url))

/** Where the run's build writes its outcome (named in the environment the test workers inherit). */
const statusVariable = "PV_DIST_STATUS"

interface BuildStatus {
  readonly ok: boolean
  readonly detail: string
}

let building: Promise<void> | undefined

/**
 * Starts building this checkout's dist/ (`npm run -s build`, what `npm start` runs before `node dist/src/main.js`)
 * once per vitest run, and returns at once: vitest runs the projects' global setups one after the other in its
 * own process, so the later ones find the first one's mark and start nothing. The build (~25 s of one core) runs
 * beside the first test files instead of before all of them; the files that start compiled processes wait for it
 * first (`awaitDist`, the setup file of those projects). Its outcome goes to a file named in the environment
 * the workers inherit (PV_DIST_STATUS), since they are other processes. (In watch mode the setups run once per
 * start of vitest: restart it after changing the sources, or children run the earlier build.)
 */
export const buildDist = (): Promise<void> => {
  if (process.env.PV_DIST_BUILT === projectRoot) return building ?? Promise.resolve()
  process.env.PV_DIST_BUILT = projectRoot
  const statusFile = join(tmpdir(), `pv-dist-${process.pid}-${Date.now()}.json`)
  process.env[statusVariable] = statusFile
  const started = Date.now()
  const npm = process.platform === "win32" ? "npm.cmd" : "npm"
  building = new Promise<void>((resolve) => {
    const child = spawn(npm, ["run", "-s", "build"], { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
    const finish = (status: BuildStatus) => {
      writeFileSync(statusFile, JSON.stringify(status))
      console.log(status.ok ? `tests: built dist/ in ${Date.now() - started} ms` : `tests: ${status.detail}`)
      resolve()
    }
    child.once("error", (error) => finish({ ok: false, detail: `npm run -s build could not start: ${error.message}` }))
    child.once("exit", (code, signal) => {
      if (code !== 0) return finish({ ok: false, detail: `npm run -s build failed (exit ${code ?? signal}):\n${output}` })
      if (!existsSync(join(projectRoot, "dist", "src", "main.js")) || !existsSync(join(projectRoot, "dist", "policy"))) {
        return finish({ ok: false, detail: "the build did not produce dist/src/main.js and dist/policy" })
      }
      finish({ ok: true, detail: "" })
    })
  })
  return building
}

/**
 * Waits for the run's build (`buildDist`) to end; throws its output when it failed. At once when this run
 * builds nothing (no global setup of ours ran, or PV_DIST_BUILT named this checkout already).
 */
export const awaitDist = async (): Promise<void> => {
  const statusFile = process.env[statusVariable]
  if (statusFile === undefined) return
  while (!existsSync(statusFile)) await new Promise((resolve) => setTimeout(resolve, 100))
  const status = JSON.parse(readFileSync(statusFile, "utf8")) as BuildStatus
  if (!status.ok) throw new Error(status.detail)
}

/**
 * The end of a run that started the build here: it waits for the build to finish (a run whose files all ended
 * first never leaves dist/ half written), then removes the status file.
 */
export const finishDist = async (): Promise<void> => {
  if (building === undefined) return
  await building
  rmSync(process.env[statusVariable]!, { force: true })
}

/**
 * The global setup of the HTTP projects (vitest.config.ts), whose tests start compiled processes of this
 * checkout (second instances, `pv` children: test/support/spawned.ts), whatever PV_FAULTS_MAIN says.
 */
export default function setup(): () => Promise<void> {
  void buildDist()
  return finishDist
}
