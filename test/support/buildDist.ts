import { spawn } from "node:child_process"
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const projectRoot = fileURLToPath(new URL("../..", import.meta.url))
const dist = join(projectRoot, "dist")

/** The build the run makes (`npm <buildCommand>`): the package's `prepack` runs the same (test/client/package.test.ts checks it). */
export const buildCommand: ReadonlyArray<string> = ["run", "-s", "build"]

/** Where the run's build writes its outcome (named in the environment the test workers inherit). */
const statusVariable = "PV_DIST_STATUS"

interface BuildStatus {
  readonly ok: boolean
  readonly detail: string
}

let building: Promise<void> | undefined

const npm = process.platform === "win32" ? "npm.cmd" : "npm"

/** `npm run -s build` in the checkout: incremental (tsc's state is dist/.tsbuildinfo), so a build of unchanged sources costs ~8 s of CPU, not ~23. */
const runBuild = (): Promise<BuildStatus> =>
  new Promise((resolve) => {
    const child = spawn(npm, buildCommand, { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.once("error", (error) => resolve({ ok: false, detail: `npm ${buildCommand.join(" ")} could not start: ${error.message}` }))
    child.once("exit", (code, signal) =>
      resolve(code === 0 ? { ok: true, detail: "" } : { ok: false, detail: `npm ${buildCommand.join(" ")} failed (exit ${code ?? signal}):\n${output}` }))
  })

/**
 * Makes dist/ after an incremental build what the same build writes on a clean tree (the package's `prepack`
 * on a fresh checkout), so the package test packs it instead of building the sources a second time: removes every
 * file that neither tsc writes for the current sources (tsconfig.build.json's files and their outputs, as tsc
 * itself computes them, and its .tsbuildinfo) nor the build wrote since `since` (the copied policy and page
 * assets, the bundles: rewritten by every build), so the outputs of deleted or renamed sources and the leftovers of
 * earlier build steps go, then the directories left empty. Returns the outputs tsc should have written that are
 * missing (removed by hand: tsc's incremental state says they are written, so only a build from scratch writes them).
 */
const pruneDist = async (since: number): Promise<ReadonlyArray<string>> => {
  const ts = (await import("typescript")).default
  const config = ts.getParsedCommandLineOfConfigFile(join(projectRoot, "tsconfig.build.json"), undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"))
    }
  })
  if (config === undefined) throw new Error("tsconfig.build.json could not be read")
  const outputs = config.fileNames.flatMap((file) => ts.getOutputFileNames(config, file, false))
  const buildInfo = config.options.tsBuildInfoFile
  const written = new Set([...outputs, ...(buildInfo === undefined ? [] : [buildInfo])].map((file) => resolve(file)))
  /** Removes what the build did not write under `directory`; whether anything is left there. */
  const sweep = (directory: string): boolean => {
    let left = false
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const path = join(directory, entry.name)
      if (entry.isDirectory() ? sweep(path) : written.has(path) || lstatSync(path).mtimeMs >= since) left = true
      else rmSync(path, { recursive: true, force: true })
    }
    return left
  }
  sweep(dist)
  return outputs.filter((file) => !existsSync(file))
}

/**
 * Starts building this checkout's dist/ (`npm run -s build`, what `npm start` runs before `node dist/src/main.js`
 * and the package's `prepack` before `npm pack`) once per vitest run, and returns at once: vitest runs the
 * projects' global setups one after the other in its own process, so the later ones find the first one's mark and
 * start nothing. The build is incremental, then pruned to what a clean tree's build holds (`pruneDist`); from
 * scratch when an output is missing. It runs beside the first test files instead of before all of them; the files
 * that start compiled processes or pack the package wait for it first (`awaitDist`: the setup file of those
 * projects, test/client/package.test.ts). Its outcome goes to a file named in the environment the workers inherit
 * (PV_DIST_STATUS), since they are other processes. (In watch mode the setups run once per start of vitest:
 * restart it after changing the sources, or children run the earlier build.)
 */
export const buildDist = (): Promise<void> => {
  if (process.env.PV_DIST_BUILT === projectRoot) return building ?? Promise.resolve()
  process.env.PV_DIST_BUILT = projectRoot
  const statusFile = join(tmpdir(), `pv-dist-${process.pid}-${Date.now()}.json`)
  process.env[statusVariable] = statusFile
  const started = Date.now()
  const build = async (): Promise<BuildStatus> => {
    // The instant the build starts, on the clock file times are read from: what it writes is as late or later.
    mkdirSync(dist, { recursive: true })
    const mark = join(dist, ".build-started")
    writeFileSync(mark, "")
    const since = lstatSync(mark).mtimeMs
    rmSync(mark)
    const status = await runBuild()
    if (!status.ok) return status
    const missing = await pruneDist(since)
    if (missing.length === 0) return status
    console.log(`tests: ${missing.length} outputs of tsc missing from dist/ (${missing[0]}, …): building it from scratch`)
    rmSync(dist, { recursive: true, force: true })
    return runBuild()
  }
  building = build()
    .catch((error: unknown): BuildStatus => ({ ok: false, detail: `the build of dist/ failed: ${String(error)}` }))
    .then((status) => {
      const done = !status.ok || (existsSync(join(dist, "src", "main.js")) && existsSync(join(dist, "policy")))
        ? status
        : { ok: false, detail: "the build did not produce dist/src/main.js and dist/policy" }
      writeFileSync(statusFile, JSON.stringify(done))
      console.log(done.ok ? `tests: built dist/ in ${Date.now() - started} ms` : `tests: ${done.detail}`)
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
