import type { Reporter, SerializedError, TestModule, TestRunEndReason } from "vitest/node"

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
    let line = `vitest: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`
    if (fileErrors > 0) line += `, ${fileErrors} file errors`
    if (unhandled > 0) line += `, ${unhandled} unhandled errors`
    if (runError > 0) line += ", 1 run error"
    console.log(line)
  }
}
