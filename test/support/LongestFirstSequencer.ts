import { readFileSync } from "node:fs"
import { relative } from "node:path"
import { BaseSequencer, type TestSpecification } from "vitest/node"

/**
 * Seconds each file took in a whole run (durations.json: unit and pglite files, by path relative to the
 * repository), for a checkout with no previous run of its own (a fresh clone, CI): vitest's cache lives in
 * node_modules and starts empty, so without it every file counted as longest and the longest ones started in
 * the order of their names, some of them last. Refresh it from vitest's cache after a whole run:
 * `node scripts/test-durations.mjs`.
 */
const recorded = JSON.parse(readFileSync(new URL("durations.json", import.meta.url), "utf8")) as Record<string, number>

/**
 * Vitest's own order (sequence.groupOrder first), except that within a group the files of all its projects
 * are ordered together, longest first by the previous run's durations (vitest's cache; else durations.json,
 * whose figure for a path serves its run on either database; a file with neither counts as longest), instead
 * of one project's files after the other's in the order of their names. So the longest files
 * (test/client/package.test.ts, the CLI and webhook suites) start at once, and the group does not end with one
 * of them running alone. Only the order changes: every file still runs, in its project.
 */
export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const base = await super.sort(files)
    const rank = new Map(base.map((spec, index) => [spec, index]))
    const duration = (spec: TestSpecification) =>
      this.ctx.cache.getTestSpecificationResult(spec)?.duration ??
        (recorded[relative(this.ctx.config.root, spec.moduleId).replaceAll("\\", "/")] ?? Number.POSITIVE_INFINITY) * 1000
    return [...base].sort((a, b) => {
      const group = a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder
      if (group !== 0) return group
      const [da, db] = [duration(a), duration(b)]
      if (da !== db) return da > db ? -1 : 1
      return rank.get(a)! - rank.get(b)!
    })
  }
}
