import { readFileSync } from "node:fs"
import { isIP } from "node:net"
import { Config, ConfigProvider, Context, Effect, Layer, Option, Redacted, Schema, SchemaIssue } from "effect"
import { verifySync } from "../verify/NodeCrypto.js"
import { isValidKeyName } from "../verify/Note.js"
import { countedQuorumOf, parsePolicy } from "../verify/Policy.js"
import { isHttpUrl, type LogWitnessSetting, parseLogWitness } from "./LogWitness.js"

/**
 * The service's settings, read once through Effect's ConfigProvider and validated: a bad value stops the
 * start with a message naming the variable. The server and the CLI read the default provider (the process
 * environment); tests read a provider they build (`AppConfig.layerFromEnv`, `readAppConfig`), so nothing of
 * the developer's environment reaches them. Nothing here reads `process.env` itself.
 */
export interface AppConfigShape extends LaunchSettings {
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
  /**
   * Requests one process works on at once; beyond it 503 `overloaded` at once (PV_MAX_IN_FLIGHT). Unset:
   * an adaptive limit that follows measured latency (http/ConcurrencyLimit.ts).
   */
  readonly maxInFlight: Option.Option<number>
  /** Time a client has to send complete request headers. */
  readonly headersTimeoutMs: number
  /** Time a client has to send a whole request, body included. */
  readonly requestTimeoutMs: number
  /** How long an idle keep-alive connection stays open. */
  readonly keepAliveTimeoutMs: number
  /** Largest request header block, in bytes (431 beyond it). */
  readonly maxHeaderBytes: number
  /** Open connections per process; further ones are closed at once. */
  readonly maxConnections: number
  /** Peers whose X-Forwarded-For / Forwarded headers are believed (CIDRs). */
  readonly trustedProxies: ReadonlyArray<string>
  /** Browser origins allowed on credentialed endpoints and /mcp (exact `scheme://host[:port]`). */
  readonly allowedOrigins: ReadonlyArray<string>
  /** On PostgreSQL, sign with per-process keys instead of refusing to start without configured keys. */
  readonly devEphemeralKeys: boolean
  /**
   * Last resort for a statement that gets no answer (it fails and its connection is dropped). Outages
   * are noticed sooner by the pool's probe (platform/PgPool.ts), so this only bounds a stuck statement.
   */
  readonly dbQueryTimeoutMs: number
  /** Time to open one database connection. */
  readonly dbConnectTimeoutMs: number
  /** PostgreSQL connections this process may open (its pool's size). */
  readonly dbPoolSize: number
  /** Ed25519 PKCS#8 PEM signing the transparency log's checkpoints (PV_LOG_SIGNING_KEY). */
  readonly logSigningKey: Option.Option<Redacted.Redacted>
  /** The log's origin line and note key name (PV_LOG_ORIGIN). */
  readonly logOrigin: string
  /** Log reads (checkpoint, key, tiles, proofs) per client address per minute. */
  readonly logRateLimitPerMinute: number
  /** Write a log entry with every receipt and event (PV_LOG_ENABLED; off only for benchmark baselines). */
  readonly logEnabled: boolean
  /** How often this instance's integrator looks for pending entries; 0 = never (another instance or an explicit call integrates). */
  readonly logIntegrationIntervalMs: number
  /**
   * Witnesses the log submits each new checkpoint to (PV_LOG_WITNESSES: comma-separated
   * `<submission URL prefix>=<witness verifier key>`); none = checkpoints are served unwitnessed.
   */
  readonly logWitnesses: ReadonlyArray<LogWitnessSetting>
  /** Valid cosignatures a checkpoint needs before /log/checkpoint serves it (PV_LOG_WITNESS_QUORUM; default: every witness). */
  readonly logWitnessQuorum: number
  /**
   * PV_LOG_WITNESS_POLICY: a C2SP tlog-policy file giving the witnesses (each with its submission URL) and
   * the quorum instead of PV_LOG_WITNESSES and PV_LOG_WITNESS_QUORUM, which it fills in when read.
   */
  readonly logWitnessPolicy: Option.Option<string>
  /**
   * At most one submission to each witness per this many ms, from one submission's start to the next
   * (PV_LOG_WITNESS_INTERVAL_MS): each submission carries the latest checkpoint, covering every one since.
   */
  readonly logWitnessIntervalMs: number
  /** `json`: one JSON line per request on stdout (PV_LOG_FORMAT); `text`: no per-request lines. */
  readonly logFormat: "json" | "text"
  /** When set, GET /metrics requires `Authorization: Bearer <token>` (PV_METRICS_TOKEN). */
  readonly metricsToken: Option.Option<Redacted.Redacted>
  /** OTLP/HTTP collector base URL (OTEL_EXPORTER_OTLP_ENDPOINT); unset = tracing off. */
  readonly otlpEndpoint: Option.Option<string>
  /** `service.name` of exported spans (OTEL_SERVICE_NAME). */
  readonly otelServiceName: string
  /** Webhook URLs may be `http://` (PV_WEBHOOK_ALLOW_HTTP; local development and tests only). */
  readonly webhookAllowHttp: boolean
  /** Ed25519 PKCS#8 PEM signing `v1a` webhook deliveries (PV_WEBHOOK_SIGNING_KEY). */
  readonly webhookSigningKey: Option.Option<Redacted.Redacted>
  /** Webhook URLs may reach loopback, private and other internal addresses (PV_WEBHOOK_ALLOW_PRIVATE; development and tests only). */
  readonly webhookAllowPrivate: boolean
  /** Webhook attempts one process has in flight at once (PV_WEBHOOK_CONCURRENCY). */
  readonly webhookConcurrency: number
  /** A subscription failing for this long becomes `disabled` (PV_WEBHOOK_MAX_FAILURE_SECONDS). */
  readonly webhookMaxFailureSeconds: number
  /** One attempt's time limit: connect, answer and the part of its body read (10 s; tests shorten it). */
  readonly webhookTimeoutMs: number
  /**
   * A delivery lease lasts the time-out plus this (PV_WEBHOOK_LEASE_MARGIN_MS, 10 s; tests shorten it): how long
   * a dead instance's subscriptions wait to be taken over. It covers an acknowledgement's retries (~6 s).
   */
  readonly webhookLeaseMarginMs: number
  /** A subscription's turn ends after this many delivered events (PV_WEBHOOK_TURN_EVENTS, 100): it yields its slot. */
  readonly webhookTurnEvents: number
  /** No attempt of a turn starts this long after the turn began (PV_WEBHOOK_TURN_MS, 10 s; tests shorten it). */
  readonly webhookTurnMs: number
  /** Open event streams one API key may hold on one instance (PV_MAX_STREAMS_PER_KEY). */
  readonly maxStreamsPerKey: number
  /** How often an open event stream sends a comment line when nothing else is sent (15 s; tests shorten it). */
  readonly streamHeartbeatMs: number
}

/** A refusal naming `variable`, in the same shape as Config's own (`… at ["VARIABLE"]`). */
/**
 * PV_LOG_WITNESS_INTERVAL_MS's default: one submission per witness a second, as Tessera and Sigsum logs
 * submit, which keeps a receipt's witnessed checkpoint within the 3 s budget (docs/PERFORMANCE.md, W3).
 */
export const DefaultWitnessIntervalMs = 1_000

export const refusal = (variable: string, message: string): Config.ConfigError =>
  new Config.ConfigError(new Schema.SchemaError(new SchemaIssue.Pointer([variable], new SchemaIssue.InvalidValue({ message }))))

/** `value` when `ok(value)`, else the refusal. */
const validate = <A>(variable: string, message: string, ok: (value: A) => boolean) =>
  Config.mapEffect((value: A) => ok(value) ? Effect.succeed(value) : Effect.fail(refusal(variable, message)))

/** An integer variable, refused with `message` unless `ok`. */
const integer = (name: string, message: string, ok: (n: number) => boolean) =>
  Config.schema(Schema.Int.check(Schema.makeFilter((n: number) => ok(n) || message)), name)

/** A secret variable, refused with `message` unless `ok`. */
const secret = (name: string, message: string, ok: (value: string) => boolean) =>
  Config.schema(Schema.Redacted(Schema.String).check(Schema.makeFilter((r: Redacted.Redacted<string>) => ok(Redacted.value(r)) || message)), name)

const positive = (name: string, fallback: number) =>
  integer(name, `${name} must be a positive integer`, (n) => n > 0).pipe(Config.withDefault(fallback))

/** `a.b.c.d`, `a.b.c.d/n`, an IPv6 address or `v6/n`. */
export const isCidr = (entry: string): boolean => {
  const [address, bits, ...rest] = entry.split("/")
  const family = isIP(address ?? "")
  if (family === 0 || rest.length > 0) return false
  if (bits === undefined) return true
  const n = Number(bits)
  return /^\d{1,3}$/.test(bits) && n <= (family === 4 ? 32 : 128)
}

/** A browser origin: scheme, host and optional port, nothing else (no path, no trailing slash). */
export const isOrigin = (entry: string): boolean => {
  try {
    const url = new URL(entry)
    return (url.protocol === "https:" || url.protocol === "http:") && url.origin === entry
  } catch {
    return false
  }
}

/** A comma-separated list (empty or unset = none); every entry must pass `check`. */
const list = (name: string, message: string, check: (entry: string) => boolean) =>
  Config.String(name).pipe(
    Config.withDefault(""),
    Config.map((value) => value.split(",").map((entry) => entry.trim()).filter((entry) => entry.length > 0)),
    validate(name, message, (entries: ReadonlyArray<string>) => entries.every(check))
  )

/** What a launch needs before any server code loads (app/Launch.ts, a cluster's primary among them). */
export interface LaunchSettings {
  readonly port: number
  readonly host: string
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  /** Processes serving the port (PV_WORKERS; above 1 needs DATABASE_URL). */
  readonly workers: number
  /** This worker's index, 0 … workers − 1, set by the primary for the workers it forks (PV_WORKER_INDEX). */
  readonly workerIndex: number
  /** How long SIGTERM/SIGINT lets requests in flight finish before connections are closed. */
  readonly shutdownGraceMs: number
  /** Print the start-up banner (URL, docs, operator token location, a curl to paste). */
  readonly banner: boolean
}

// An empty variable counts as unset (the ConfigProvider's rule), as environment files often leave them.
// One definition each: the launch reads these, and AppConfig reads them again with everything else.
const launchDefinitions = {
  // 0 asks the OS for a free port (the banner prints the one chosen).
  port: integer("PORT", "PORT must be an integer from 0 to 65535", (n) => n >= 0 && n <= 65535).pipe(Config.withDefault(8080)),
  host: Config.String("HOST").pipe(Config.withDefault("127.0.0.1")),
  databaseUrl: secret("DATABASE_URL", "DATABASE_URL must be a postgres:// or postgresql:// URL", (url) => /^postgres(ql)?:\/\//.test(url)).pipe(
    Config.option
  ),
  workers: positive("PV_WORKERS", 1),
  workerIndex: integer("PV_WORKER_INDEX", "PV_WORKER_INDEX must be an integer ≥ 0 (set by the cluster's primary)", (n) => n >= 0).pipe(
    Config.withDefault(0)
  ),
  shutdownGraceMs: positive("PV_SHUTDOWN_GRACE_MS", 10_000),
  banner: Config.Boolean("PV_BANNER").pipe(Config.withDefault(true))
}

/** The launch's settings, refused with the same messages as AppConfig's. */
export const launchSettings: Config.Config<LaunchSettings> = Config.all(launchDefinitions)

const settings: Config.Config<AppConfigShape> = Config.all({
  ...launchDefinitions,
  dataDir: Config.String("PV_DATA_DIR").pipe(Config.withDefault("./.pv-data")),
  operatorToken: secret("PV_OPERATOR_TOKEN", "PV_OPERATOR_TOKEN must be at least 32 characters", (token) => token.length >= 32).pipe(
    Config.option
  ),
  internalToken: Config.Redacted("PV_INTERNAL_TOKEN").pipe(Config.option),
  eventSigningKey: Config.Redacted("PV_EVENT_SIGNING_KEY").pipe(Config.option),
  humanRateLimitPerMinute: positive("PV_HUMAN_RATE_LIMIT_PER_MINUTE", 60),
  operatorRateLimitPerMinute: positive("PV_OPERATOR_RATE_LIMIT_PER_MINUTE", 120),
  authFailureLimitPerMinute: positive("PV_AUTH_FAILURE_LIMIT_PER_MINUTE", 20),
  redisUrl: secret("REDIS_URL", "REDIS_URL must be a redis:// or rediss:// URL", (url) => /^rediss?:\/\//.test(url)).pipe(Config.option),
  loadDemoData: Config.Boolean("PV_DEMO_DATA").pipe(Config.withDefault(true)),
  maxInFlight: integer("PV_MAX_IN_FLIGHT", "PV_MAX_IN_FLIGHT must be a positive integer (unset: adaptive)", (n) => n > 0).pipe(Config.option),
  headersTimeoutMs: positive("PV_HEADERS_TIMEOUT_MS", 10_000),
  requestTimeoutMs: positive("PV_REQUEST_TIMEOUT_MS", 30_000),
  keepAliveTimeoutMs: positive("PV_KEEP_ALIVE_TIMEOUT_MS", 5_000),
  maxHeaderBytes: positive("PV_MAX_HEADER_BYTES", 16_384),
  maxConnections: positive("PV_MAX_CONNECTIONS", 1_024),
  trustedProxies: list(
    "PV_TRUSTED_PROXIES",
    "PV_TRUSTED_PROXIES must be a comma-separated list of IPv4/IPv6 addresses or CIDRs (e.g. 10.0.0.0/8, ::1)",
    isCidr
  ),
  allowedOrigins: list(
    "PV_ALLOWED_ORIGINS",
    "PV_ALLOWED_ORIGINS must be a comma-separated list of origins such as https://app.example.com",
    isOrigin
  ),
  devEphemeralKeys: Config.Boolean("PV_DEV_EPHEMERAL_KEYS").pipe(Config.withDefault(false)),
  dbQueryTimeoutMs: positive("PV_DB_QUERY_TIMEOUT_MS", 10_000),
  dbConnectTimeoutMs: positive("PV_DB_CONNECT_TIMEOUT_MS", 1_000),
  dbPoolSize: positive("PV_DB_POOL_SIZE", 16),
  logSigningKey: Config.Redacted("PV_LOG_SIGNING_KEY").pipe(Config.option),
  logOrigin: Config.schema(
    Schema.String.check(Schema.makeFilter((origin: string) =>
      isValidKeyName(origin) || "PV_LOG_ORIGIN must be non-empty, without white space or '+' (e.g. example.com/pv-log)"
    )),
    "PV_LOG_ORIGIN"
  ).pipe(Config.withDefault("localhost/pv-log")),
  logRateLimitPerMinute: positive("PV_LOG_RATE_LIMIT_PER_MINUTE", 1_200),
  logEnabled: Config.Boolean("PV_LOG_ENABLED").pipe(Config.withDefault(true)),
  logIntegrationIntervalMs: integer(
    "PV_LOG_INTEGRATION_INTERVAL_MS",
    "PV_LOG_INTEGRATION_INTERVAL_MS must be an integer ≥ 0 (0: this instance never integrates)",
    (n) => n >= 0
  ).pipe(Config.withDefault(250)),
  logWitnesses: list(
    "PV_LOG_WITNESSES",
    "PV_LOG_WITNESSES must be a comma-separated list of <submission URL prefix>=<witness verifier key> " +
      "(e.g. https://witness.example/w1=witness.example/w1+1a2b3c4d+BASE64 from the witness's GET /witness/key)",
    (entry) => parseLogWitness(entry) !== undefined
  ).pipe(Config.map((entries) => entries.map((entry) => parseLogWitness(entry)!))),
  logWitnessQuorum: integer("PV_LOG_WITNESS_QUORUM", "PV_LOG_WITNESS_QUORUM must be a positive integer", (n) => n > 0).pipe(
    Config.withDefault(0)
  ),
  logWitnessPolicy: Config.String("PV_LOG_WITNESS_POLICY").pipe(Config.option),
  logWitnessIntervalMs: integer(
    "PV_LOG_WITNESS_INTERVAL_MS",
    "PV_LOG_WITNESS_INTERVAL_MS must be an integer from 1 to 60000 (ms between submissions to one witness)",
    (n) => n >= 1 && n <= 60_000
  ).pipe(Config.withDefault(DefaultWitnessIntervalMs)),
  logFormat: Config.Literals(["json", "text"], "PV_LOG_FORMAT").pipe(Config.withDefault("text" as const)),
  metricsToken: secret("PV_METRICS_TOKEN", "PV_METRICS_TOKEN must be at least 16 characters", (token) => token.length >= 16).pipe(
    Config.option
  ),
  otlpEndpoint: Config.schema(
    Schema.String.check(Schema.makeFilter((url: string) =>
      isHttpUrl(url) || "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL (e.g. http://127.0.0.1:4318)"
    )),
    "OTEL_EXPORTER_OTLP_ENDPOINT"
  ).pipe(Config.option),
  otelServiceName: Config.String("OTEL_SERVICE_NAME").pipe(Config.withDefault("pv-trust-service")),
  webhookAllowHttp: Config.Boolean("PV_WEBHOOK_ALLOW_HTTP").pipe(Config.withDefault(false)),
  webhookSigningKey: Config.Redacted("PV_WEBHOOK_SIGNING_KEY").pipe(Config.option),
  webhookAllowPrivate: Config.Boolean("PV_WEBHOOK_ALLOW_PRIVATE").pipe(Config.withDefault(false)),
  webhookConcurrency: positive("PV_WEBHOOK_CONCURRENCY", 32),
  webhookMaxFailureSeconds: positive("PV_WEBHOOK_MAX_FAILURE_SECONDS", 86_400),
  webhookTimeoutMs: integer("PV_WEBHOOK_TIMEOUT_MS", "PV_WEBHOOK_TIMEOUT_MS must be an integer from 100 to 10000", (n) => n >= 100 && n <= 10_000)
    .pipe(Config.withDefault(10_000)),
  webhookLeaseMarginMs: integer("PV_WEBHOOK_LEASE_MARGIN_MS", "PV_WEBHOOK_LEASE_MARGIN_MS must be an integer from 1000 to 60000", (n) => n >= 1_000 && n <= 60_000)
    .pipe(Config.withDefault(10_000)),
  webhookTurnEvents: positive("PV_WEBHOOK_TURN_EVENTS", 100),
  webhookTurnMs: positive("PV_WEBHOOK_TURN_MS", 10_000),
  maxStreamsPerKey: positive("PV_MAX_STREAMS_PER_KEY", 10),
  streamHeartbeatMs: integer("PV_STREAM_HEARTBEAT_MS", "PV_STREAM_HEARTBEAT_MS must be an integer from 100 to 15000", (n) => n >= 100 && n <= 15_000)
    .pipe(Config.withDefault(15_000))
})

/**
 * Settings that only make sense together. On PostgreSQL every instance must sign with the same
 * configured keys (docs/API.md §14), so a start without them is refused before anything touches the
 * database.
 */
const requiredKey = (variable: string, signs: string) =>
  refusal(
    variable,
    `${variable} must be set when DATABASE_URL is: every instance signs ${signs} with the same configured key ` +
      "(an Ed25519 PKCS#8 PEM, e.g. from `openssl genpkey -algorithm ed25519`); " +
      "PV_DEV_EPHEMERAL_KEYS=true allows a throw-away key per process in development"
  )

/**
 * PV_LOG_WITNESS_POLICY's file, read into the witnesses and quorum it stands for: every witness needs its
 * submission URL (http or https), and the quorum must be k of all the witnesses (countedQuorumOf).
 */
const witnessesFromPolicy = (config: AppConfigShape, file: string): Effect.Effect<AppConfigShape, Config.ConfigError> => {
  const refuse = (message: string) => Effect.fail(refusal("PV_LOG_WITNESS_POLICY", `PV_LOG_WITNESS_POLICY (${file}): ${message}`))
  if (config.logWitnesses.length > 0 || config.logWitnessQuorum !== 0) {
    return refuse("set either PV_LOG_WITNESS_POLICY or PV_LOG_WITNESSES and PV_LOG_WITNESS_QUORUM, not both")
  }
  let text: string
  try {
    text = readFileSync(file, "utf8")
  } catch (error) {
    return refuse(`cannot be read: ${(error as Error).message}`)
  }
  const policy = verifySync(parsePolicy(text))
  if (!policy.ok) return refuse(policy.detail)
  const counted = countedQuorumOf(policy.value)
  if (!counted.ok) return refuse(counted.detail)
  const unreachable = counted.value.witnesses.find((w) => w.url === undefined || !isHttpUrl(w.url))
  if (unreachable !== undefined) return refuse(`witness ${unreachable.name} needs its submission URL (http:// or https://) after its key`)
  return Effect.succeed({
    ...config,
    logWitnesses: counted.value.witnesses.map((w) => ({ url: w.url!.replace(/\/+$/, ""), verifierKey: w.vkey })),
    logWitnessQuorum: counted.value.quorum
  })
}

/**
 * The witnesses come from PV_LOG_WITNESSES or PV_LOG_WITNESS_POLICY; a witness key listed twice is refused
 * (it would count twice toward the quorum); the quorum defaults to every witness, and cannot ask for more
 * witnesses than there are.
 */
const withQuorum = (given: AppConfigShape): Effect.Effect<AppConfigShape, Config.ConfigError> =>
  Effect.gen(function*() {
    const config = Option.isSome(given.logWitnessPolicy) ? yield* witnessesFromPolicy(given, given.logWitnessPolicy.value) : given
    const keys = config.logWitnesses.map((w) => w.verifierKey.split("+").slice(0, 2).join("+"))
    const twice = keys.find((key, i) => keys.indexOf(key) !== i)
    if (twice !== undefined) return yield* Effect.fail(refusal("PV_LOG_WITNESSES", `PV_LOG_WITNESSES lists the witness key ${twice} twice`))
    const count = config.logWitnesses.length
    if (config.logWitnessQuorum === 0) return { ...config, logWitnessQuorum: count }
    if (config.logWitnessQuorum > count) {
      return yield* Effect.fail(refusal("PV_LOG_WITNESS_QUORUM", `PV_LOG_WITNESS_QUORUM (${config.logWitnessQuorum}) is more than the ${count} witness(es) in PV_LOG_WITNESSES`))
    }
    return config
  })

/** The settings without the rules on signing keys: `pv witness serve` reads these (it signs with its own key). */
export const baseAppConfig: Config.Config<AppConfigShape> = settings.pipe(Config.mapEffect(withQuorum))

export const appConfig: Config.Config<AppConfigShape> = baseAppConfig.pipe(Config.mapEffect((config) => {
  if (Option.isNone(config.databaseUrl) || config.devEphemeralKeys) return Effect.succeed(config)
  if (Option.isNone(config.eventSigningKey)) return Effect.fail(requiredKey("PV_EVENT_SIGNING_KEY", "events and receipts"))
  if (Option.isNone(config.logSigningKey)) return Effect.fail(requiredKey("PV_LOG_SIGNING_KEY", "log checkpoints"))
  if (Option.isNone(config.webhookSigningKey)) return Effect.fail(requiredKey("PV_WEBHOOK_SIGNING_KEY", "v1a webhook deliveries"))
  return Effect.succeed(config)
}))

/** The settings read from exactly `env` (never process.env): the tests' way to check the rules. */
export const readAppConfig = (env: Record<string, string>): Effect.Effect<AppConfigShape, Config.ConfigError> =>
  appConfig.parse(ConfigProvider.fromEnv({ env }))

/** `appConfig` from the current ConfigProvider with `overrides` on top; a refused setting is a defect. */
const fromProvider = (overrides: Partial<AppConfigShape>) =>
  Effect.map(Effect.orDie(appConfig), (base): AppConfigShape => ({ ...base, ...overrides }))

export class AppConfig extends Context.Service<AppConfig, AppConfigShape>()("pv/AppConfig") {
  /** Read through the current ConfigProvider: the default one is the process environment (main, the CLI). */
  static readonly layer: Layer.Layer<AppConfig, Config.ConfigError> = Layer.effect(this, appConfig)
  /**
   * Read from exactly `env` (never the process environment), then `overrides` on top (values that are
   * not environment strings: a test server's data directory, its database URL). A refused setting is a
   * defect, as a test configuration is never meant to be refused.
   */
  static readonly layerFromEnv = (env: Record<string, string>, overrides: Partial<AppConfigShape> = {}): Layer.Layer<AppConfig> =>
    Layer.effect(this, fromProvider(overrides)).pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))
}

/**
 * The current ConfigProvider's settings with `overrides` on top. Provide a ConfigProvider (e.g.
 * `ConfigProvider.layer(ConfigProvider.fromEnv({ env }))`) or this reads the process environment;
 * `AppConfig.layerFromEnv` does both in one call.
 */
export const AppConfigFrom = (overrides: Partial<AppConfigShape>): Layer.Layer<AppConfig> => Layer.effect(AppConfig, fromProvider(overrides))
