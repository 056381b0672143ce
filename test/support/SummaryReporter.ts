import { readFileSync, writeFileSync } from "node:fs"
import type { Reporter, SerializedError, TestModule, TestRunEndReason, TestSpecification } from "vitest/node"

/** CPU seconds the whole machine has spent busy since boot (/proc/stat: every state but idle and iowait), or undefined off Linux. */
const machineBusySeconds = (): number | undefined => {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
    const busy = fields.reduce((sum, value, index) => (index === 3 || index === 4 ? sum : sum + value), 0)
    return busy / 100
  } catch {
    return undefined
  }
}

/** Whether a file failed outside its tests: at collection, or in a beforeAll/afterAll hook of the file or a suite. */
const hasErrorsOutsideTests = (module: TestModule): boolean =>
  module.errors().length > 0 || Array.from(module.children.allSuites()).some((suite) => suite.errors().length > 0)

/**
 * Prints one plain closing line (`vitest: N passed, N failed, N skipped`) after vitest's own summary,
 * so CI tooling that reads the last lines can count the tests. A test that did not finish (pending)
 * counts as skipped.
 *
 * Failures outside tests count as failed too, so the line never says "0 failed" when vitest exits
 * non-zero: a file that failed at collection, in a beforeAll/afterAll hook (its tests are then reported
 * skipped, or passed for afterAll) or never finished is one file error (`, N file errors`); each error
 * vitest caught outside any test is one unhandled error (`, N unhandled errors`). A run vitest still
 * calls failed without any of these (e.g. no test files) adds `, 1 run error`.
 */
export default class SummaryReporter implements Reporter {
  private started = Date.now()
  private busyAtStart = machineBusySeconds()
  /** Per project: when its first file started and its last file ended, in ms since the run started. */
  private readonly spans = new Map<string, { first: number; last: number; files: number }>()

  onTestRunStart(_specifications: ReadonlyArray<TestSpecification>): void {
    this.started = Date.now()
    this.busyAtStart = machineBusySeconds()
  }

  onTestModuleStart(module: TestModule): void {
    const name = module.project.name
    const now = Date.now() - this.started
    const span = this.spans.get(name)
    if (span === undefined) this.spans.set(name, { first: now, last: now, files: 0 })
  }

  onTestModuleEnd(module: TestModule): void {
    const span = this.spans.get(module.project.name)
    if (span === undefined) return
    span.last = Date.now() - this.started
    span.files++
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>, reason: TestRunEndReason): void {
    const counts = { passed: 0, failed: 0, skipped: 0 }
    let fileErrors = 0
    for (const module of testModules) {
      let failedTests = 0
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") counts.passed++
        else if (state === "failed") failedTests++
        else counts.skipped++
      }
      counts.failed += failedTests
      const state = module.state()
      const unfinished = state === "pending" || state === "queued"
      if (hasErrorsOutsideTests(module) || unfinished || (state === "failed" && failedTests === 0)) fileErrors++
    }
    const unhandled = unhandledErrors.length
    counts.failed += fileErrors + unhandled
    const runError = reason === "failed" && counts.failed === 0 ? 1 : 0
    counts.failed += runError
    const extra = [
      ...(fileErrors > 0 ? [`${fileErrors} file errors`] : []),
      ...(unhandled > 0 ? [`${unhandled} unhandled errors`] : []),
      ...(runError > 0 ? ["1 run error"] : [])
    ]
    console.log(`vitest: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped${extra.map((e) => `, ${e}`).join("")}`)
    // For `npm test` (test/run.ts), which runs two vitest processes and counts both on its last line.
    const summaryFile = process.env.PV_TEST_SUMMARY_FILE
    if (summaryFile !== undefined) writeFileSync(summaryFile, JSON.stringify({ ...counts, extra }))
    // Where the wall time went (each project's first start to last end) and how busy the machine was, so a
    // slow run can be told apart from a loaded machine.
    const seconds = (ms: number) => (ms / 1000).toFixed(0)
    const phases = [...this.spans].map(([name, span]) => `${name} ${seconds(span.first)}–${seconds(span.last)} s (${span.files} files)`)
    const busyNow = machineBusySeconds()
    const busy = busyNow !== undefined && this.busyAtStart !== undefined ? `, machine busy ${(busyNow - this.busyAtStart).toFixed(0)} CPU-s` : ""
    if (phases.length > 0) console.log(`vitest phases: ${phases.join(", ")}; ${seconds(Date.now() - this.started)} s in all${busy}`)
  }
}
