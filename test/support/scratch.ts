import { mkdirSync, mkdtempSync, readdirSync, rmSync, statfsSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/**
 * Where a test run writes its scratch files (test servers' data directories, fault deployments' databases,
 * packed tarballs, browser profiles): a directory of its own in memory (/dev/shm, tmpfs) when the machine has
 * one with room, else the OS temporary directory. `vitest.config.ts` points TMPDIR at it for the whole run, so
 * every `tmpdir()` of the tests and of their child processes lands there, and removes it when the run ends.
 * `PV_TEST_TMPFS=0` keeps them in the OS temporary directory.
 *
 * Why: on the development machines' ext4 a file costs ~0.65 ms of kernel CPU to create, so copying the
 * migrated PGlite template (1,080 files, 40 MB) for a test server took ~0.7 s of CPU, half of a server's start;
 * into tmpfs the same copy takes 0.05 s, and PGlite's writes and fsyncs during the tests cost nothing
 * either. A process killed by a test (`kill -9`) loses nothing it wrote on either: what the fault tests
 * check is a crash of the process, not of the machine.
 *
 * What must outlive a run (the migrated templates, the compile cache of test children, the package test's consumer
 * dependencies) stays in the OS temporary directory: `cacheDir`.
 */

const memory = "/dev/shm"
const runPrefix = "pv-test-run-"
/** Room the run's scratch needs at its peak (data directories of ~40 MB, the package test's install). */
const needed = 2 * 1024 ** 3

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Removes the scratch directories of earlier runs whose process is gone (a run killed before its clean-up). */
const sweep = () => {
  for (const name of readdirSync(memory)) {
    const pid = Number(name.slice(runPrefix.length).split("-")[0])
    if (name.startsWith(runPrefix) && Number.isSafeInteger(pid) && !alive(pid)) rmSync(join(memory, name), { recursive: true, force: true })
  }
}

/** The run's scratch directory in memory, made here (and earlier runs' leftovers removed); undefined where there is none with room. */
export const memoryScratch = (): string | undefined => {
  if (process.platform !== "linux" || process.env.PV_TEST_TMPFS === "0") return undefined
  try {
    const { bavail, bsize } = statfsSync(memory)
    if (bavail * bsize < needed) return undefined
    sweep()
    return mkdtempSync(join(memory, `${runPrefix}${process.pid}-`))
  } catch {
    return undefined
  }
}

/** What outlives a run: the OS temporary directory as it was before the run moved TMPDIR (PV_TEST_CACHE_DIR). */
export const cacheDir = (): string => {
  const dir = process.env.PV_TEST_CACHE_DIR ?? tmpdir()
  mkdirSync(dir, { recursive: true })
  return dir
}
