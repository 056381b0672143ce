import { BaseSequencer, type TestSpecification } from "vitest/node"

/**
 * Vitest's own order (sequence.groupOrder first), except that within a group the files of all its projects
 * are ordered together, longest first by the previous run's durations (vitest's cache; a file with none
 * counts as longest), instead of one project's files after the other's in the order of their names. So
 * the longest files (test/client/package.test.ts, the webhook suites) start at once, and the group does not
 * end with one of them running alone. Only the order changes: every file still runs, in its project.
 */
export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const base = await super.sort(files)
    const rank = new Map(base.map((spec, index) => [spec, index]))
    const duration = (spec: TestSpecification) => this.ctx.cache.getTestSpecificationResult(spec)?.duration ?? Number.POSITIVE_INFINITY
    return [...base].sort((a, b) => {
      const group = a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder
      if (group !== 0) return group
      const [da, db] = [duration(a), duration(b)]
      if (da !== db) return da > db ? -1 : 1
      return rank.get(a)! - rank.get(b)!
    })
  }
}
