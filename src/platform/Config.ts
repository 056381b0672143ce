import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

/**
 * The service's settings, read once from the environment and validated: a bad value stops the start
 * with a message naming the variable.
 */
export interface AppConfigShape {
  readonly port: number
  readonly host: string
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly dataDir: string
  readonly operatorToken: Option.Option<Redacted.Redacted>
  readonly internalToken: Option.Option<Redacted.Redacted>
  readonly eventSigningKey: Option.Option<Redacted.Redacted>
  readonly humanRateLimitPerMinute: number
  readonly operatorRateLimitPerMinute: number
  /** Failed authentications one address may make per minute before it is refused with 429. */
  readonly authFailureLimitPerMinute: number
  readonly redisUrl: Option.Option<Redacted.Redacted>
  readonly loadDemoData: boolean
  /** Print the start-up banner (URL, docs, operator token location, a curl to paste). */
  readonly banner: boolean
}

export class AppConfig extends Context.Tag("pv/AppConfig")<AppConfig, AppConfigShape>() {}

const operatorToken = Config.redacted("PV_OPERATOR_TOKEN").pipe(
  Config.validate({
    message: "PV_OPERATOR_TOKEN must be at least 32 characters",
    validation: (token) => Redacted.value(token).length >= 32
  }),
  Config.option
)

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be a positive integer`, validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

export const appConfig: Config.Config<AppConfigShape> = Config.all({
  // 0 asks the OS for a free port (the banner prints the one chosen).
  port: Config.integer("PORT").pipe(
    Config.validate({ message: "PORT must be an integer from 0 to 65535", validation: (n) => n >= 0 && n <= 65535 }),
    Config.withDefault(8080)
  ),
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
  databaseUrl: Config.redacted("DATABASE_URL").pipe(
    Config.validate({
      message: "DATABASE_URL must be a postgres:// or postgresql:// URL",
      validation: (url) => /^postgres(ql)?:\/\//.test(Redacted.value(url))
    }),
    Config.option
  ),
  dataDir: Config.string("PV_DATA_DIR").pipe(Config.withDefault("./.pv-data")),
  operatorToken,
  internalToken: Config.redacted("PV_INTERNAL_TOKEN").pipe(Config.option),
  eventSigningKey: Config.redacted("PV_EVENT_SIGNING_KEY").pipe(Config.option),
  humanRateLimitPerMinute: positive("PV_HUMAN_RATE_LIMIT_PER_MINUTE", 60),
  operatorRateLimitPerMinute: positive("PV_OPERATOR_RATE_LIMIT_PER_MINUTE", 120),
  authFailureLimitPerMinute: positive("PV_AUTH_FAILURE_LIMIT_PER_MINUTE", 20),
  // An empty REDIS_URL means "no Redis", as environment files often leave it.
  redisUrl: Config.redacted("REDIS_URL").pipe(
    Config.validate({
      message: "REDIS_URL must be a redis:// or rediss:// URL",
      validation: (url) => Redacted.value(url) === "" || /^rediss?:\/\//.test(Redacted.value(url))
    }),
    Config.option,
    Config.map(Option.filter((url) => Redacted.value(url) !== ""))
  ),
  loadDemoData: Config.boolean("PV_DEMO_DATA").pipe(Config.withDefault(true)),
  banner: Config.boolean("PV_BANNER").pipe(Config.withDefault(true))
})

export const AppConfigLive = Layer.effect(AppConfig, appConfig)

/** Tests and the CLI build a config directly. */
export const AppConfigFrom = (overrides: Partial<AppConfigShape>): Layer.Layer<AppConfig> =>
  Layer.effect(
    AppConfig,
    Effect.map(Effect.orDie(appConfig), (base) => ({ ...base, ...overrides }))
  )
