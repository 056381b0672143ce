import type { Reporter } from "vitest/node"

interface TaskLike {
  readonly type: string
  readonly mode?: string
  readonly result?: { readonly state?: string }
  readonly tasks?: ReadonlyArray<TaskLike>
}

/**
 * Prints one plain closing line (`vitest: N passed, N failed, N skipped`) after vitest's own summary,
 * so CI tooling that reads the last lines can count the tests.
 */
export default class SummaryReporter implements Reporter {
  onFinished(files: ReadonlyArray<TaskLike>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 }
    const walk = (task: TaskLike) => {
      if (task.type === "test") {
        const state = task.result?.state
        if (state === "pass") counts.passed++
        else if (state === "fail") counts.failed++
        else counts.skipped++
      }
      task.tasks?.forEach(walk)
    }
    files.forEach(walk)
    console.log(`vitest: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`)
  }
}
