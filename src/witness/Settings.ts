import { Config, Effect, type Option, type Redacted } from "effect"
import { isValidKeyName, parseVerifierKey } from "../log/Note.js"
import { refusal } from "../platform/Config.js"

/** What `pv witness serve` reads beside the service's own settings (PORT, HOST, PV_DATA_DIR, DATABASE_URL, limits). */
export interface WitnessSettings {
  /** The witness's key name (PV_WITNESS_NAME), e.g. `witness.example/w1`. */
  readonly name: string
  /** Ed25519 PKCS#8 PEM (PV_WITNESS_SIGNING_KEY); unset = generated once in the data directory (embedded only). */
  readonly signingKey: Option.Option<Redacted.Redacted>
  /** The logs it witnesses (PV_WITNESS_LOGS): note verifier keys; a log's origin is its key's name. */
  readonly logs: ReadonlyArray<string>
}

/**
 * PV_WITNESS_NAME, PV_WITNESS_SIGNING_KEY and PV_WITNESS_LOGS, validated. A module of their own: `pv witness serve`
 * reads them before it loads the witness's server and database modules (witness/Launch.ts).
 */
export const witnessSettings: Config.Config<WitnessSettings> = Config.all({
  name: Config.String("PV_WITNESS_NAME").pipe(Config.withDefault("localhost/pv-witness")),
  signingKey: Config.Redacted("PV_WITNESS_SIGNING_KEY").pipe(Config.option),
  logs: Config.String("PV_WITNESS_LOGS").pipe(
    Config.withDefault(""),
    Config.map((value) => value.split(",").map((entry) => entry.trim()).filter((entry) => entry.length > 0))
  )
}).pipe(Config.mapEffect((settings) => {
  if (!isValidKeyName(settings.name)) {
    return Effect.fail(refusal("PV_WITNESS_NAME", "must be a key name without white space or '+' (e.g. witness.example/w1)"))
  }
  if (settings.logs.length === 0) {
    return Effect.fail(refusal("PV_WITNESS_LOGS", "must list the note verifier key of at least one log (the log's GET /log/key verifier_key)"))
  }
  const bad = settings.logs.find((key) => !parseVerifierKey(key).ok)
  if (bad !== undefined) return Effect.fail(refusal("PV_WITNESS_LOGS", `${JSON.stringify(bad)} is not a note verifier key`))
  return Effect.succeed(settings)
}))
