import { readFileSync } from "node:fs"
import { relative } from "node:path"
import { BaseSequencer, type TestSpecification } from "vitest/node"
import { waitsForFaults } from "./faultsDone.js"

/**
 * Seconds each file took in a whole run (durations.json: unit and pglite files, by path relative to the
 * repository), for a checkout with no previous run of its own (a fresh clone, CI): vitest's cache lives in
 * node_modules and starts empty, so without it every file counted as longest and the longest ones started in
 * the order of their names, some of them last. Refresh it from vitest's cache after a whole run:
 * `node scripts/test-durations.mjs`.
 */
const recorded = JSON.parse(readFileSync(new URL("durations.json", import.meta.url), "utf8")) as Record<string, number>

/**
 * Vitest's own order (sequence.groupOrder first, one project's files after the other's), except that within a
 * group the projects come in the order of their longest files (those waiting for the run's build of dist/ after the
 * others), and each project's files longest first, by the
 * previous run's durations (vitest's cache; else durations.json, whose figure for a path serves its run on
 * either database; a file with neither counts as longest), instead of the projects in the order of their names
 * and their files failed first. So the longest file of all (test/client/package.test.ts) starts at once,
 * each project's longest files start its turn, and the group ends with short files (the project whose longest
 * file is the shortest comes last), not with a long one running alone.
 *
 * A project's files stay together because vitest's pool (Pool.schedule in vitest/dist/chunks/index.*.js) keeps a
 * worker process after a file only when the next file in line is of the same project (and environment): a file
 * of another project gets a new process, which boots Node, imports vitest, effect and the sources and compiles
 * PGlite's WebAssembly again (a second or more of CPU). One longest-first order across the projects alternates
 * them in line: a run of the unit and pglite projects (117 files) started 33 processes that way, 8 this way
 * (at most four per project: each worker passes into a project once). Only the order changes: every file still
 * runs, in its project.
 */
export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const base = await super.sort(files)
    const rank = new Map(base.map((spec, index) => [spec, index]))
    const duration = (spec: TestSpecification) =>
      this.ctx.cache.getTestSpecificationResult(spec)?.duration ??
        (recorded[relative(this.ctx.config.root, spec.moduleId).replaceAll("\\", "/")] ?? Number.POSITIVE_INFINITY) * 1000
    const longest = [...base].sort((a, b) => {
      const group = a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder
      if (group !== 0) return group
      const [da, db] = [duration(a), duration(b)]
      if (da !== db) return da > db ? -1 : 1
      return rank.get(a)! - rank.get(b)!
    })
    // Each project where its longest file comes: a project is in one group, and the groups come in order, so a
    // stable sort by this place keeps the groups' order and each project's files longest first.
    const place = new Map<string, number>()
    longest.forEach((spec, index) => place.has(spec.project.name) || place.set(spec.project.name, index))
    // Within a group, the projects whose files wait for the run's build of dist/ (a global setup: the HTTP projects,
    // test/support/buildDist.ts) after those that need none, so the build runs beside files that can run: in a fresh
    // clone the pglite project came first and its four workers waited ~17 s for a full build, one core idle.
    // So do the projects whose files wait for the timed run under `npm test` (test/support/faultsDone.ts).
    const mayWaitForFaults = (spec: TestSpecification) => spec.project.config.setupFiles.some((file) => file.endsWith("afterFaults.ts"))
    const waits = (spec: TestSpecification) => ((spec.project.config.globalSetup?.length ?? 0) > 0 || mayWaitForFaults(spec) ? 1 : 0)
    // Then a project of fewer files than workers (browser: 2) before the others: its files run beside theirs instead of
    // alone at the end (a fresh clone's run ended with the browser files on two of four workers for 10 s).
    const count = new Map<string, number>()
    for (const spec of files) count.set(spec.project.name, (count.get(spec.project.name) ?? 0) + 1)
    const few = (spec: TestSpecification) => (count.get(spec.project.name)! < this.ctx.config.maxWorkers ? 0 : 1)
    // Under `npm test`, before all of those, the files of such projects that may run beside the timed run.
    const afterFaults = (spec: TestSpecification) =>
      mayWaitForFaults(spec) && waitsForFaults(relative(this.ctx.config.root, spec.moduleId).replaceAll("\\", "/")) ? 1 : 0
    return longest.sort((a, b) =>
      a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder ||
      afterFaults(a) - afterFaults(b) ||
      waits(a) - waits(b) ||
      few(a) - few(b) ||
      place.get(a.project.name)! - place.get(b.project.name)!)
  }
}
