import { parseArgs } from "node:util"
import { Effect, Layer, Option, Schema } from "effect"
import { ApiKeys } from "../access/ApiKeys.js"
import { ServicesLive } from "../app/Server.js"
import { CreateApiKeyRequest } from "../domain/ApiKeyRecord.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseLive } from "../platform/Database.js"
import { importDeterminations } from "./Import.js"
import { fail, print } from "./Output.js"

/**
 * The CLI's commands that work on the database directly (`pv migrate`, `pv keys …`, `pv import`), in a module
 * of their own that src/cli/main.ts loads only when one of them runs.
 */

/** `pv migrate`: every migration applied, then the database closed. */
export const migrateCommand = Effect.gen(function*() {
  yield* Layer.build(DatabaseLive)
  yield* print("migrations applied")
}).pipe(Effect.scoped, Effect.provide(AppConfig.layer))

/** Services without the HTTP server, for commands that work on the database directly. */
const WithServices = <A, E>(program: Effect.Effect<A, E, any>) =>
  program.pipe(Effect.provide(ServicesLive), Effect.provide(AppConfig.layer)) as Effect.Effect<A, E | Error>

/** `pv keys create|list|revoke …`; `usage` is the CLI's, shown after an unknown subcommand. */
export const keysCommand = (args: ReadonlyArray<string>, usage: string) => WithServices(keysProgram(args, usage))

const keysProgram = (args: ReadonlyArray<string>, usage: string) => {
  const [sub, ...rest] = args
  const { values, positionals } = parseArgs({
    args: rest as Array<string>,
    allowPositionals: true,
    options: {
      tenant: { type: "string" },
      name: { type: "string" },
      scopes: { type: "string" },
      "rate-limit": { type: "string" },
      "daily-quota": { type: "string" },
      "expires-at": { type: "string" }
    }
  })
  switch (sub) {
    case "create":
      return Effect.gen(function*() {
        const request = yield* Schema.decodeUnknownEffect(CreateApiKeyRequest)({
          tenant_id: values.tenant,
          name: values.name,
          scopes: (values.scopes ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0),
          ...(values["rate-limit"] !== undefined ? { rate_limit_per_minute: Number(values["rate-limit"]) } : {}),
          ...(values["daily-quota"] !== undefined ? { daily_quota: Number(values["daily-quota"]) } : {}),
          ...(values["expires-at"] !== undefined ? { expires_at: values["expires-at"] } : {})
        }).pipe(Effect.mapError((e) => new Error(`invalid key request:\n${e.message}`)))
        const keys = yield* ApiKeys
        const created = yield* keys.create(request)
        yield* print(created)
        yield* Effect.sync(() => console.error("The api_key above is shown once; only its SHA-256 is stored."))
      })
    case "list":
      return Effect.flatMap(ApiKeys, (keys) => keys.list(Option.fromNullishOr(values.tenant))).pipe(
        Effect.flatMap((list) => print({ keys: list }))
      )
    case "revoke":
      return positionals[0] === undefined
        ? fail("usage: pv keys revoke KEY_ID")
        : Effect.flatMap(ApiKeys, (keys) => keys.revoke(positionals[0]!)).pipe(Effect.andThen(print(`revoked ${positionals[0]}`)))
    default:
      return fail(`unknown keys command '${sub ?? ""}'\n\n${usage}`)
  }
}

/** `pv import FILE.ndjson`: each line stored as a PUT would; fails naming how many lines failed. */
export const importCommand = (file: string) =>
  WithServices(Effect.gen(function*() {
    const summary = yield* importDeterminations(file)
    yield* print(summary)
    if (summary.failed.length > 0) return yield* fail(`${summary.failed.length} line(s) failed`)
  }))
