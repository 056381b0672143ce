import { rmSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { defineConfig, type TestProjectConfiguration } from "vitest/config"
import LongestFirstSequencer from "./test/support/LongestFirstSequencer.js"
import { memoryScratch } from "./test/support/scratch.js"

const postgresUrl = process.env.PV_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

const reachable = (url: string) =>
  new Promise<boolean>((resolve) => {
    const { hostname, port } = new URL(url)
    const socket = connect({ host: hostname, port: Number(port || 5432) })
    socket.setTimeout(1500)
    socket.once("connect", () => (socket.destroy(), resolve(true)))
    socket.once("error", () => resolve(false))
    socket.once("timeout", () => (socket.destroy(), resolve(false)))
  })

/**
 * Projects: pure/unit tests once, and every HTTP suite (`*.http.test.ts`) once per database (embedded
 * PGlite always, real PostgreSQL when it is reachable, required when PV_REQUIRE_POSTGRES=1, as in CI), except
 * the suites of the edge alone and one that picks its databases itself (`databaseFree`), which run once;
 * the browser and fault suites.
 */
export default defineConfig(async () => {
  // The run's scratch files in memory where the machine allows (test/support/scratch.ts says why): TMPDIR for
  // the workers and their children, removed at the end; what outlives a run stays in the OS temp directory.
  if (process.env.PV_TEST_CACHE_DIR === undefined) {
    process.env.PV_TEST_CACHE_DIR = tmpdir()
    const scratch = memoryScratch()
    if (scratch !== undefined) {
      process.env.TMPDIR = scratch
      process.once("exit", () => rmSync(scratch, { recursive: true, force: true }))
    }
  }
  const postgres = await reachable(postgresUrl)
  if (!postgres && process.env.PV_REQUIRE_POSTGRES === "1") {
    throw new Error(`PostgreSQL is required (PV_REQUIRE_POSTGRES=1) but ${postgresUrl} is not reachable`)
  }
  if (!postgres) console.warn(`PostgreSQL not reachable at ${postgresUrl}: HTTP suites run on embedded PGlite only`)
  const http = ["test/**/*.http.test.ts"]
  // Under `npm test` (test/run.ts, which names the mark in PV_TEST_FAULTS_DONE): the browser and PGlite files wait
  // for the fault groups to end, and the PostgreSQL files, which run in the fault groups' vitest process, come after
  // those groups and set the mark (test/support/faultsDone.ts).
  const afterFaults = "test/support/afterFaults.ts"
  const underRunner = process.env.PV_TEST_FAULTS_DONE !== undefined
  // Builds dist/ once per run (test/support/buildDist.ts) for the HTTP projects, whose tests start compiled
  // processes (second instances, CLI children: test/support/spawned.ts); the fault projects' setup builds the
  // same, or takes the build PV_FAULTS_MAIN names (test/faults/globalSetup.ts). The build runs beside the first
  // files (the unit and browser ones, which need no dist/): each file of these projects waits for it first (distReady),
  // and so does the one unit file that packs it (test/client/package.test.ts, which builds it when no setup did).
  const buildOnce = "test/support/buildDist.ts"
  const distReady = ["test/support/distReady.ts"]
  // HTTP suites of the edge alone (the OpenAPI document, the Origin rule, client addresses, slow clients,
  // keep-alive, the fuzzers' refusals): nothing they check depends on which database is behind the server,
  // so they run once, on embedded PGlite, not once per database.
  // Also once: `pv witness serve` as a child process (test/witness/process.http.test.ts), whose tests choose their
  // databases themselves (a data directory, then a scratch PostgreSQL database), so both projects ran the same tests.
  const databaseFree = [
    ...["openapi", "origin", "clientAddress", "slowClients", "keepAlive", "fuzz"].map((name) => `test/http/${name}.http.test.ts`),
    "test/witness/process.http.test.ts",
    // `pv log monitor` against a fake log on loopback: no database at all.
    "test/cli/monitor.http.test.ts"
  ]
  const faults = ["test/faults/**/*.test.ts"]
  const browser = ["test/web/**/*.browser.test.ts"]
  const projects: Array<TestProjectConfiguration> = [
    { extends: true, test: { name: "unit", include: ["test/**/*.test.ts"], exclude: [...http, ...faults, ...browser] } },
    // The page at `/` in Debian's chromium (playwright-core), against a real server on embedded PGlite.
    { extends: true, test: { name: "browser", include: browser, env: { PV_TEST_DB: "pglite" }, setupFiles: [afterFaults] } },
    { extends: true, test: { name: "pglite", include: http, env: { PV_TEST_DB: "pglite" }, globalSetup: [buildOnce], setupFiles: [...distReady, afterFaults] } }
  ]
  // The fault rules of docs/API.md §13 against the compiled server (`npm run build` once, then `node dist/src/main.js`
  // child processes), in groups of their own after the other projects (sequence.groupOrder), so they never run
  // beside the HTTP suites at the same priority: `npm test` (test/run.ts) runs them in a vitest process of their own,
  // beside the unit files of another at a lower priority (nice +10), which take the CPU the fault files leave
  // without making them late; a plain `vitest run` runs the groups one after the other.
  // Each fault file's processes have their own data directory or scratch database, port
  // (PORT=0 or a free one), receivers and proxies. The long files that mostly wait (webhook deliveries, kill -9
  // rounds, a cluster's metrics: no bound a neighbour could make late) run three at a time ("faults"); the files with
  // a wall-clock bound or a drain under load, which a second file's processes could make late, and the
  // read-your-writes trials, whose load made the webhook files' bounds late beside them, run one by one after them
  // ("faults-alone").
  const faultsAlone = ["drain", "clusterDrain", "outage", "slowClients", "start", "flood", "overload", "readYourWrites"]
    .map((name) => `test/faults/${name}.test.ts`)
  const faultProject = (name: string, include: Array<string>, exclude: Array<string>, maxWorkers: number, groupOrder: number): TestProjectConfiguration => ({
    extends: true,
    test: {
      name,
      include,
      exclude,
      globalSetup: ["test/faults/globalSetup.ts"],
      setupFiles: distReady,
      testTimeout: 120_000,
      pool: "forks",
      maxWorkers,
      sequence: { groupOrder },
      env: { PV_TEST_POSTGRES_URL: postgresUrl, PV_FAULTS_POSTGRES: postgres ? "1" : "0" }
    }
  })
  projects.push(faultProject("faults", faults, faultsAlone, 3, 1), faultProject("faults-alone", faultsAlone, [], 1, 2))
  if (postgres) {
    // In the first group, four files at a time: the PostgreSQL files mostly wait on the database and their timers.
    // `npm test` (test/run.ts) runs them in the vitest process of the fault groups, after those, beside the unit and
    // unbounded PGlite files at a lower priority (their servers' database probe must answer within 750 ms, which a
    // fully busy machine at the same priority can miss); a plain `vitest run` runs them in the first group, as a
    // project's turn (test/support/LongestFirstSequencer.ts). A test server holds at most 8 connections
    // (PV_DB_POOL_SIZE in test/support/testConfig.ts), two-instance suites 16, so four files stay within the shared
    // server's 100.
    projects.push({
      extends: true,
      test: {
        name: "postgres",
        include: http,
        exclude: databaseFree,
        env: { PV_TEST_DB: "postgres", PV_TEST_POSTGRES_URL: postgresUrl },
        globalSetup: [buildOnce],
        setupFiles: distReady,
        ...(underRunner ? { sequence: { groupOrder: 3 } } : {})
      }
    })
  }
  return {
    test: {
      testTimeout: 60_000,
      hookTimeout: 120_000,
      // Vitest's default on a 2-core machine is one worker (cores − 1), so every file would wait on the
      // database, on its own server and on its sleeps in turn. The HTTP suites mostly wait (with two workers a
      // whole run kept about one of two cores busy), so four overlap those waits: the unit, browser, PGlite and
      // PostgreSQL files run first, four at a time; then the fault projects, in groups of their own.
      maxWorkers: 4,
      // isolate: false (every project): a worker runs one file after the other in one process and one module
      // graph, instead of a new process per file that boots Node, imports effect and the sources, and compiles
      // PGlite's WebAssembly again. Measured on a 2-core machine: the PGlite HTTP files 136 → 97 s of CPU
      // (77 → 58 s wall), the PostgreSQL ones 77 → 50 s (73 → 59 s). The files keep nothing between them: each
      // closes its servers, receivers and clients in afterAll, mocks no module, and restores what it sets in
      // process.env and every spy; the sources' module-level values are caches of derived, immutable data. Effect's
      // metric registry is one per process, as it was for the servers of one file: tests read deltas or their own
      // servers' values.
      isolate: false,
      // Within a group, one project's files after the other's, longest first, the projects in the order of their
      // longest files: a worker process serves the next file only if it is of its own project
      // (test/support/LongestFirstSequencer.ts).
      sequence: { sequencer: LongestFirstSequencer },
      reporters: ["default", "./test/support/SummaryReporter.ts"],
      projects
    }
  }
})
