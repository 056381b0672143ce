import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { setPriority, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { buildDist, finishDist } from "./support/buildDist.ts"

/**
 * `npm test` (run by Node's type stripping): the whole suite as two vitest runs side by side, with one build of dist/
 * for both (test/support/buildDist.ts, started here; the files that need it wait for it).
 *
 * - The "timed" run, at the priority this command has: the fault groups (kill -9, outages, drains, start windows:
 *   bounds in wall-clock time), then `postgres` (a test server's database probe must answer within 750 ms).
 * - The main run, at a lower priority (nice +10: when a process of the timed run wants a core, the scheduler gives
 *   these ~10 % of it; their servers, browsers and children inherit it): `unit` and the PGlite files with no bound
 *   in wall-clock time beside the timed run, then `browser` and the other `pglite` files once it has ended (their
 *   tests bound wall-clock time too: test/support/faultsDone.ts).
 *
 * One after the other, the fault groups kept about one of the two cores idle for ~40 % of a whole run; beside them,
 * those files take the CPU they leave, while a fault process still gets a core as soon as it wants one (the
 * margins the fault files print, a drain's /readyz, an outage's slowest answer, a start window, are those of a run
 * alone).
 *
 * The main run's report streams as it goes; the timed run's follows it, whole. The last line counts both
 * (`vitest: N passed, N failed, N skipped`); the exit code is non-zero when either failed.
 * With arguments (`npm test -- --project unit test/x.test.ts`), one plain `vitest run` with them.
 */

const root = fileURLToPath(new URL("..", import.meta.url))
const vitest = join(root, "node_modules", "vitest", "vitest.mjs")
const args = process.argv.slice(2)

interface Counts {
  readonly passed: number
  readonly failed: number
  readonly skipped: number
  readonly extra: ReadonlyArray<string>
}

const exitOf = (child: ChildProcess): Promise<number> =>
  new Promise((resolve) => {
    child.once("error", (error) => {
      console.error(`test: vitest could not start: ${error.message}`)
      resolve(1)
    })
    child.once("exit", (code, signal) => resolve(code ?? (signal === null ? 1 : 128)))
  })

if (args.length > 0) {
  process.exitCode = await exitOf(spawn(process.execPath, [vitest, "run", ...args], { cwd: root, stdio: "inherit" }))
} else {
  const scratch = mkdtempSync(join(tmpdir(), "pv-test-run-"))
  const summaryOf = (name: string) => join(scratch, `${name}.json`)
  // The mark that the timed run has ended (test/support/faultsDone.ts): this process writes it then, whatever its end.
  const faultsDone = join(scratch, "faults-done")
  const run = (name: string, projects: ReadonlyArray<string>, stdio: "inherit" | "pipe") =>
    spawn(process.execPath, [vitest, "run", ...projects.flatMap((project) => ["--project", project])], {
      cwd: root,
      stdio: ["ignore", stdio, stdio],
      env: { ...process.env, PV_TEST_SUMMARY_FILE: summaryOf(name), PV_TEST_FAULTS_DONE: faultsDone }
    })

  const started = Date.now()
  // Sets PV_DIST_BUILT and PV_DIST_STATUS here, so neither run's global setup builds again; both wait for this one.
  const building = buildDist()
  const timed = run("timed", ["faults*", "postgres"], "pipe")
  const main = run("main", ["!postgres", "!faults*"], "inherit")
  try {
    if (main.pid !== undefined) setPriority(main.pid, 10)
  } catch (error) {
    // Not fatal: the runs then share the machine at one priority, as two vitest processes would.
    console.error(`test: could not lower the main run's priority: ${String(error)}`)
  }
  // A signal to this process alone (a CI time-out, say) reaches both runs, as a terminal's Ctrl-C does.
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      main.kill(signal)
      timed.kill(signal)
    })
  }
  const timedOutput: Array<Buffer> = []
  timed.stdout?.on("data", (chunk: Buffer) => timedOutput.push(chunk))
  timed.stderr?.on("data", (chunk: Buffer) => timedOutput.push(chunk))
  const ended = { main: 0, timed: 0 }
  const [mainCode, timedCode] = await Promise.all([
    exitOf(main).then((code) => ((ended.main = Date.now() - started), code)),
    exitOf(timed).then((code) => {
      ended.timed = Date.now() - started
      if (!existsSync(faultsDone)) writeFileSync(faultsDone, "")
      return code
    })
  ])
  await building
  await finishDist()
  process.stdout.write(`\n── the timed run: the fault groups, then postgres (vitest run --project 'faults*' --project postgres) ──\n`)
  process.stdout.write(Buffer.concat(timedOutput))

  const read = (name: string, code: number): Counts => {
    try {
      return JSON.parse(readFileSync(summaryOf(name), "utf8")) as Counts
    } catch {
      // No summary: vitest ended before its reporter could write one (a configuration error, a crash).
      return { passed: 0, failed: code === 0 ? 0 : 1, skipped: 0, extra: [`${name} run ended without a summary (exit ${code})`] }
    }
  }
  const counts = [read("main", mainCode), read("timed", timedCode)]
  rmSync(scratch, { recursive: true, force: true })
  const sum = (field: "passed" | "failed" | "skipped") => counts.reduce((total, c) => total + c[field], 0)
  const seconds = (ms: number) => (ms / 1000).toFixed(0)
  console.log(`test: the main run (unit, browser, pglite) ended after ${seconds(ended.main)} s, the timed run (faults, postgres) after ${seconds(ended.timed)} s`)
  const extra = counts.flatMap((c) => c.extra)
  console.log(`vitest: ${sum("passed")} passed, ${sum("failed")} failed, ${sum("skipped")} skipped${extra.map((e) => `, ${e}`).join("")}`)
  process.exitCode = mainCode !== 0 ? mainCode : timedCode
}
