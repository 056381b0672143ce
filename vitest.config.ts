import { connect } from "node:net"
import { defineConfig, type TestProjectConfiguration } from "vitest/config"

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
  const postgres = await reachable(postgresUrl)
  if (!postgres && process.env.PV_REQUIRE_POSTGRES === "1") {
    throw new Error(`PostgreSQL is required (PV_REQUIRE_POSTGRES=1) but ${postgresUrl} is not reachable`)
  }
  if (!postgres) console.warn(`PostgreSQL not reachable at ${postgresUrl}: HTTP suites run on embedded PGlite only`)
  const http = ["test/**/*.http.test.ts"]
  // HTTP suites of the edge alone (the OpenAPI document, the Origin rule, client addresses, slow clients,
  // keep-alive, the fuzzers' refusals): nothing they check depends on which database is behind the server,
  // so they run once, on embedded PGlite, not once per database.
  // Also once: `pv witness serve` as a child process (test/witness/process.http.test.ts), whose tests choose their
  // databases themselves (a data directory, then a scratch PostgreSQL database), so both projects ran the same tests.
  const databaseFree = [
    ...["openapi", "origin", "clientAddress", "slowClients", "keepAlive", "fuzz"].map((name) => `test/http/${name}.http.test.ts`),
    "test/witness/process.http.test.ts"
  ]
  const faults = ["test/faults/**/*.test.ts"]
  const browser = ["test/web/**/*.browser.test.ts"]
  const projects: Array<TestProjectConfiguration> = [
    { extends: true, test: { name: "unit", include: ["test/**/*.test.ts"], exclude: [...http, ...faults, ...browser] } },
    // The page at `/` in Debian's chromium (playwright-core), against a real server on embedded PGlite.
    { extends: true, test: { name: "browser", include: browser, env: { PV_TEST_DB: "pglite" } } },
    { extends: true, test: { name: "pglite", include: http, env: { PV_TEST_DB: "pglite" } } }
  ]
  // The fault rules of docs/API.md §13 against the compiled server (`npm run build` once, then `node dist/src/main.js`
  // child processes): one file at a time, since each starts, signals and kills whole processes.
  projects.push({
    extends: true,
    test: {
      name: "faults",
      include: faults,
      globalSetup: ["test/faults/globalSetup.ts"],
      testTimeout: 120_000,
      // vitest 5 has no poolOptions/singleFork: one worker makes vitest run the project's files one by one,
      // in a group of their own after the other projects.
      pool: "forks",
      maxWorkers: 1,
      env: { PV_TEST_POSTGRES_URL: postgresUrl, PV_FAULTS_POSTGRES: postgres ? "1" : "0" }
    }
  })
  if (postgres) {
    projects.push({ extends: true, test: { name: "postgres", include: http, exclude: databaseFree, env: { PV_TEST_DB: "postgres", PV_TEST_POSTGRES_URL: postgresUrl } } })
  }
  return {
    test: {
      testTimeout: 60_000,
      hookTimeout: 120_000,
      // Vitest's default on a 2-core machine is one worker (cores − 1), so every file would wait on the
      // database and on its own server in turn; two overlap those waits. The faults project stays serial.
      maxWorkers: 2,
      reporters: ["default", "./test/support/SummaryReporter.ts"],
      projects
    }
  }
})
