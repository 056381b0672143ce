import { spawnSync } from "node:child_process"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer, Option, Redacted, Result } from "effect"
import * as fc from "fast-check"
import { AppConfig, AppConfigFrom, launchSettings } from "../../src/platform/Config.js"
import { readConfig, testConfigLayer, testEnvironment } from "../support/testConfig.js"

/**
 * The configuration rules, read through ConfigProviders built here: nothing in these tests depends on the
 * environment of the machine that runs them.
 */

const projectRoot = fileURLToPath(new URL("../..", import.meta.url))

const refusal = (env: Record<string, string>): string => {
  const read = readConfig(env)
  if (Result.isSuccess(read)) throw new Error(`expected ${JSON.stringify(Object.keys(env))} to be refused`)
  return String(read.failure)
}

const tokenOf = (env: Record<string, string>) =>
  Option.map(Result.getOrThrow(readConfig(env)).operatorToken, Redacted.value)

const printable = fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+/=")
const tokenOfLength = (min: number, max: number) => fc.array(printable, { minLength: min, maxLength: max }).map((cs) => cs.join(""))

describe("PV_OPERATOR_TOKEN (docs/API.md §3.4: at least 32 characters)", () => {
  it("refuses 31 characters and accepts 32, naming the variable", () => {
    const message = refusal({ PV_OPERATOR_TOKEN: "x".repeat(31) })
    expect(message).toContain("PV_OPERATOR_TOKEN")
    expect(message).toContain("at least 32 characters")
    expect(tokenOf({ PV_OPERATOR_TOKEN: "x".repeat(32) })).toEqual(Option.some("x".repeat(32)))
  })

  it("refuses every token shorter than 32 characters", () => {
    fc.assert(fc.property(tokenOfLength(1, 31), (token) => {
      expect(refusal({ PV_OPERATOR_TOKEN: token })).toContain("PV_OPERATOR_TOKEN")
    }))
  })

  it("keeps every token of 32 characters or more exactly as given", () => {
    fc.assert(fc.property(tokenOfLength(32, 200), (token) => {
      expect(tokenOf({ PV_OPERATOR_TOKEN: token })).toEqual(Option.some(token))
    }))
  })

  it("is optional: unset means no configured token", () => {
    expect(tokenOf({})).toEqual(Option.none())
  })

  it("refuses a short token even where everything else is valid (the test servers' settings)", () => {
    expect(refusal({ ...testEnvironment(), PV_OPERATOR_TOKEN: "short-token" })).toContain("PV_OPERATOR_TOKEN")
  })
})

describe("defaults (docs/OPERATIONS.md, Settings)", () => {
  it("gives the documented value for every unset variable", () => {
    const config = Result.getOrThrow(readConfig({}))
    expect(config).toMatchObject({
      port: 8080,
      host: "127.0.0.1",
      dataDir: "./.pv-data",
      humanRateLimitPerMinute: 60,
      operatorRateLimitPerMinute: 120,
      authFailureLimitPerMinute: 20,
      loadDemoData: true,
      banner: true,
      maxInFlight: Option.none(),
      shutdownGraceMs: 10_000,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
      maxHeaderBytes: 16_384,
      maxConnections: 1_024,
      trustedProxies: [],
      allowedOrigins: [],
      devEphemeralKeys: false,
      dbQueryTimeoutMs: 10_000,
      dbConnectTimeoutMs: 1_000,
      dbPoolSize: 16,
      webhookLeaseMarginMs: 10_000
    })
    // Embedded mode, and no credential of any kind unless configured.
    expect(config.databaseUrl).toEqual(Option.none())
    expect(config.operatorToken).toEqual(Option.none())
    expect(config.internalToken).toEqual(Option.none())
    expect(config.eventSigningKey).toEqual(Option.none())
    expect(config.redisUrl).toEqual(Option.none())
  })

  it("refuses a pool size or a lease margin out of range, naming the variable", () => {
    for (const [variable, value] of [["PV_DB_POOL_SIZE", "0"], ["PV_DB_POOL_SIZE", "eight"], ["PV_WEBHOOK_LEASE_MARGIN_MS", "999"], ["PV_WEBHOOK_LEASE_MARGIN_MS", "60001"]] as const) {
      expect(refusal({ [variable]: value }), `${variable}=${value}`).toContain(variable)
    }
    expect(Result.getOrThrow(readConfig({ PV_DB_POOL_SIZE: "4", PV_WEBHOOK_LEASE_MARGIN_MS: "1000" }))).toMatchObject({ dbPoolSize: 4, webhookLeaseMarginMs: 1_000 })
  })

  it("refuses DATABASE_URL without PV_EVENT_SIGNING_KEY, before any database work", () => {
    const message = refusal({ DATABASE_URL: "postgres://db.invalid/pv" })
    expect(message).toContain("PV_EVENT_SIGNING_KEY")
  })

  it("never invents an operator token in DATABASE_URL mode", () => {
    const { PV_OPERATOR_TOKEN: _token, ...withoutToken } = testEnvironment()
    const config = Result.getOrThrow(readConfig({ ...withoutToken, DATABASE_URL: "postgres://db.invalid/pv" }))
    expect(config.operatorToken).toEqual(Option.none())
  })
})

describe("AppConfigFrom", () => {
  it.effect("reads the ConfigProvider it is given, then applies the overrides", () =>
    Effect.gen(function*() {
      const config = yield* AppConfig
      expect(config.humanRateLimitPerMinute).toBe(7)
      expect(config.port).toBe(0)
      expect(config.operatorToken).toEqual(Option.none())
    }).pipe(Effect.provide(
      AppConfigFrom({ port: 0 }).pipe(Layer.provide(testConfigLayer({ PV_HUMAN_RATE_LIMIT_PER_MINUTE: "7" })))
    )))
})

describe("the launch's settings (app/Launch.ts: read before any server code, a cluster's primary too)", () => {
  const launchRead = (env: Record<string, string>) => Effect.runSyncExit(launchSettings.parse(ConfigProvider.fromEnv({ env })))

  it("refuses what AppConfig refuses, naming the variable, instead of falling back to a default", () => {
    for (const [variable, value] of [["PV_SHUTDOWN_GRACE_MS", "-5"], ["PV_SHUTDOWN_GRACE_MS", "soon"], ["PV_WORKERS", "0"], ["PV_WORKERS", "two"], ["PORT", "70000"], ["PV_WORKER_INDEX", "-1"]] as const) {
      const exit = launchRead({ [variable]: value })
      expect(Exit.isFailure(exit), `${variable}=${value}`).toBe(true)
      expect(String(Exit.isFailure(exit) ? exit.cause : ""), `${variable}=${value}`).toContain(variable)
      expect(refusal({ ...testEnvironment(), [variable]: value }), `AppConfig, ${variable}=${value}`).toContain(variable)
    }
  })

  it("reads the same values AppConfig reads, by property", () => {
    fc.assert(fc.property(
      fc.integer({ min: 0, max: 65_535 }), fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1, max: 600_000 }), fc.boolean(),
      (port, workers, grace, banner) => {
        const env = { PORT: String(port), PV_WORKERS: String(workers), PV_SHUTDOWN_GRACE_MS: String(grace), PV_BANNER: String(banner) }
        const exit = launchRead(env)
        if (!Exit.isSuccess(exit)) throw new Error("refused")
        const app = Result.getOrThrow(readConfig({ ...testEnvironment(), ...env }))
        expect(exit.value).toEqual({ port: app.port, host: app.host, databaseUrl: app.databaseUrl, workers: app.workers, workerIndex: app.workerIndex, shutdownGraceMs: app.shutdownGraceMs, banner: app.banner })
        expect(exit.value).toMatchObject({ port, workers, shutdownGraceMs: grace, banner })
      }
    ))
  })
})

describe("a launch with a bad setting (src/main.ts as a process)", () => {
  it("stops before serving, exit 1, naming the variable: a cluster's primary included", () => {
    for (const env of [{ PV_WORKERS: "2", DATABASE_URL: "postgres://127.0.0.1:9/none", PV_SHUTDOWN_GRACE_MS: "soon" }, { PV_WORKERS: "many" }]) {
      const run = spawnSync(process.execPath, ["--import", "tsx", "src/main.ts"], {
        cwd: projectRoot,
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", PORT: "0", PV_DATA_DIR: join(tmpdir(), "pv-launch-refused"), ...env },
        encoding: "utf8",
        timeout: 60_000
      })
      expect(run.status, JSON.stringify(env)).toBe(1)
      expect(run.stderr, JSON.stringify(env)).toContain(env.PV_SHUTDOWN_GRACE_MS === undefined ? "PV_WORKERS" : "PV_SHUTDOWN_GRACE_MS")
      // Refused by the launch itself: the primary forked no worker to find out.
      expect(run.stderr, JSON.stringify(env)).not.toContain("failed to start")
    }
  })
})
