import { ConfigError, ConfigProvider, Effect, Either } from "effect"
import { testSigningKeyPem } from "../../src/events/Signer.js"
import { testLogSigningKeyPem } from "../../src/log/LogKey.js"
import { appConfig, type AppConfigShape } from "../../src/platform/Config.js"
import { testOperatorToken } from "./server.js"

/** A test server's settings written as the environment variables an operator would set. */
export const testEnvironment = (): Record<string, string> => ({
  PV_OPERATOR_TOKEN: testOperatorToken,
  PV_DEMO_DATA: "false",
  PV_BANNER: "false",
  // Suites share 127.0.0.1; the per-address limits get their own tests with low values.
  PV_HUMAN_RATE_LIMIT_PER_MINUTE: "100000",
  PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "100000",
  PV_AUTH_FAILURE_LIMIT_PER_MINUTE: "100000",
  PV_EVENT_SIGNING_KEY: testSigningKeyPem(),
  PV_LOG_SIGNING_KEY: testLogSigningKeyPem()
})

/** The service's configuration read from exactly `env` through a ConfigProvider built here, never process.env. */
export const readConfig = (env: Record<string, string>): Either.Either<AppConfigShape, ConfigError.ConfigError> =>
  Effect.runSync(Effect.either(Effect.withConfigProvider(appConfig, ConfigProvider.fromMap(new Map(Object.entries(env))))))

/**
 * Overrides for `startTestServer` that set every setting from a ConfigProvider built in the test (the test
 * environment above plus `env`), so nothing the server uses comes from the developer's environment. Listen
 * address, data directory and database stay the test server's. `AppConfigFrom` still *reads* process.env
 * underneath (and dies on a malformed variable there); that is src/platform/Config.ts's to change.
 */
export const isolatedConfig = (env: Record<string, string> = {}, extra: Partial<AppConfigShape> = {}): Partial<AppConfigShape> => {
  const read = readConfig({ ...testEnvironment(), ...env })
  if (Either.isLeft(read)) throw new Error(`test configuration refused: ${String(read.left)}`)
  const { port: _port, host: _host, dataDir: _dataDir, databaseUrl: _databaseUrl, ...settings } = read.right
  return { ...settings, ...extra }
}
