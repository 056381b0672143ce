import { PgClient } from "@effect/sql-pg"
import { Effect, Schema } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { groupApi } from "../api/GroupApi.js"
import { SystemApi } from "../api/SystemApi.js"
import { Unavailable } from "../domain/Problem.js"
import { latestMigrationId } from "../platform/Database.js"

/** `max(migration_id)` of the migrations table (int4, so a number), null when none ran yet. */
const LatestMigration = Schema.Struct({ latest: Schema.NullOr(Schema.Number) })
const decodeLatest = Schema.decodeUnknownEffect(LatestMigration)

export const SystemHttpLive = HttpApiBuilder.group(groupApi(SystemApi), "system", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* PgClient.PgClient
    const notReady = (detail: string) => new Unavailable({ detail })
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        sql`SELECT max(migration_id) AS latest FROM effect_sql_migrations`.pipe(
          Effect.flatMap(([row]) => decodeLatest(row ?? { latest: null })),
          Effect.timeout("2 seconds"),
          Effect.mapError(() => notReady("The database is not reachable.")),
          Effect.flatMap(({ latest }) =>
            (latest ?? 0) >= latestMigrationId
              ? Effect.succeed({ status: "ready" as const, database: "ok", migrations: latest ?? 0 })
              : Effect.fail(notReady("Migrations are not all applied."))
          )
        ))
  }))
