import { type Config, ConfigProvider, Effect, Layer, Result } from "effect"
import { testSigningKeyPem } from "../../src/events/Signer.js"
import { testLogSigningKeyPem } from "../../src/log/LogKey.js"
import { type AppConfigShape, readAppConfig } from "../../src/platform/Config.js"
import { testWebhookSigningKeyPem } from "../../src/webhooks/WebhookKey.js"

export const testOperatorToken = "op_test_0123456789abcdefghijklmnopqrstuvwxyz"

/** A test server's settings written as the environment variables an operator would set. */
export const testEnvironment = (): Record<string, string> => ({
  PV_OPERATOR_TOKEN: testOperatorToken,
  PV_DEMO_DATA: "false",
  PV_BANNER: "false",
  // Suites share 127.0.0.1; the per-address limits get their own tests with low values.
  PV_HUMAN_RATE_LIMIT_PER_MINUTE: "100000",
  PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "100000",
  PV_AUTH_FAILURE_LIMIT_PER_MINUTE: "100000",
  // Suites burst (50 simultaneous updates) on a shared, noisy machine: a pinned limit keeps them deterministic.
  // The adaptive default has its own tests (test/http/concurrencyLimit.test.ts, the fault suite's children).
  PV_MAX_IN_FLIGHT: "64",
  // Four PostgreSQL files run at once beside the PGlite ones (vitest.config.ts), some with two servers each: 8
  // connections a server keeps them within the shared PostgreSQL's 100.
  PV_DB_POOL_SIZE: "8",
  // PostgreSQL mode refuses to start without configured keys; every test server signs with the test keys.
  PV_EVENT_SIGNING_KEY: testSigningKeyPem(),
  PV_LOG_SIGNING_KEY: testLogSigningKeyPem(),
  PV_WEBHOOK_SIGNING_KEY: testWebhookSigningKeyPem()
})

/** A ConfigProvider holding exactly `env` (never process.env). */
export const testConfigProvider = (env: Record<string, string>): ConfigProvider.ConfigProvider =>
  ConfigProvider.fromEnv({ env })

/** Every Config read under this layer comes from exactly `env`. */
export const testConfigLayer = (env: Record<string, string>): Layer.Layer<never> =>
  ConfigProvider.layer(testConfigProvider(env))

/** The service's configuration read from exactly `env` through a ConfigProvider built here, never process.env. */
export const readConfig = (env: Record<string, string>): Result.Result<AppConfigShape, Config.ConfigError> =>
  Effect.runSync(Effect.result(readAppConfig(env)))

/**
 * Overrides for `startTestServer` read from the test environment above plus `env`, through a ConfigProvider
 * built here, so a test can state a setting the way an operator writes it (and have it validated). Listen
 * address, data directory and database stay the test server's. The test server itself reads its settings
 * from such a provider too (support/server.ts), never from the developer's environment.
 */
export const isolatedConfig = (env: Record<string, string> = {}, extra: Partial<AppConfigShape> = {}): Partial<AppConfigShape> => {
  const read = readConfig({ ...testEnvironment(), ...env })
  if (Result.isFailure(read)) throw new Error(`test configuration refused: ${String(read.failure)}`)
  const { port: _port, host: _host, dataDir: _dataDir, databaseUrl: _databaseUrl, ...settings } = read.success
  return { ...settings, ...extra }
}
