import type { Reporter, TestModule } from "vitest/node"

/**
 * Prints one plain closing line (`vitest: N passed, N failed, N skipped`) after vitest's own summary,
 * so CI tooling that reads the last lines can count the tests. A test that did not finish (pending)
 * counts as skipped, as before.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 }
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") counts.passed++
        else if (state === "failed") counts.failed++
        else counts.skipped++
      }
    }
    console.log(`vitest: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`)
  }
}
