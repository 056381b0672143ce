import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { randomBytes, timingSafeEqual, createHash } from "node:crypto"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { KeyPrefix } from "../domain/ApiKey.js"
import { Unauthorized } from "../domain/Problem.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"

export const operatorTokenFileName = "operator-token"

/** Where the embedded mode keeps a generated operator token. */
export const operatorTokenFile = (dataDir: string) => join(dataDir, operatorTokenFileName)

const digest = (value: string) => createHash("sha256").update(value).digest()

export interface OperatorCredentialShape {
  /** Constant-time comparison of SHA-256 digests; an API key never authenticates an operator. */
  readonly authenticate: (presented: string) => Effect.Effect<void, Unauthorized>
  /** Whether any operator token is configured (else operator endpoints are 401). */
  readonly configured: boolean
  /** Set when this start generated the token, so it is printed exactly once. */
  readonly generatedFile: Option.Option<string>
  readonly token: Option.Option<Redacted.Redacted>
}

const makeOperatorCredential = Effect.gen(function*() {
  const config = yield* AppConfig
  const mode = yield* DatabaseMode
  let generated: Option.Option<string> = Option.none()
  let token: Option.Option<Redacted.Redacted> = config.operatorToken
  if (Option.isNone(token) && mode.kind === "embedded") {
    const file = operatorTokenFile(mode.dataDir)
    if (!existsSync(file)) {
      const fresh = `pv_op_${randomBytes(32).toString("base64url")}`
      writeFileSync(file, fresh + "\n", { mode: 0o600, flag: "wx" })
      generated = Option.some(file)
    }
    chmodSync(file, 0o600)
    token = Option.some(Redacted.make(readFileSync(file, "utf8").trim()))
  }
  const expected = Option.map(token, (t) => digest(Redacted.value(t)))

  const authenticate = (presented: string): Effect.Effect<void, Unauthorized> =>
    Option.isSome(expected) && !presented.startsWith(KeyPrefix) && timingSafeEqual(digest(presented), expected.value)
      ? Effect.void
      : Effect.fail(new Unauthorized({ detail: "Operator authentication is required." }))

  return {
    authenticate: Effect.fn("OperatorCredential.authenticate")(authenticate),
    configured: Option.isSome(expected),
    generatedFile: generated,
    token
  } satisfies OperatorCredentialShape
})

/**
 * The operator credential: PV_OPERATOR_TOKEN, or in embedded mode a token generated once into the
 * data directory (mode 0600). DATABASE_URL mode never invents one: without it operator endpoints are 401.
 */
export class OperatorCredential extends Context.Service<OperatorCredential, OperatorCredentialShape>()(
  "pv/OperatorCredential",
  { make: makeOperatorCredential }
) {
  /** Needs AppConfig and DatabaseMode, which the composition root provides. */
  static readonly layer = Layer.effect(this, this.make)
}
