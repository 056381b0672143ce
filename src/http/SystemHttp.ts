import { HttpApiBuilder } from "@effect/platform"
import { PgClient } from "@effect/sql-pg"
import { Effect } from "effect"
import { Unavailable } from "../domain/Problem.js"
import { latestMigrationId } from "../platform/Database.js"
import { Api } from "./Api.js"

export const SystemHttpLive = HttpApiBuilder.group(Api, "system", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* PgClient.PgClient
    const notReady = (detail: string) => new Unavailable({ detail })
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        sql<{ latest: number | null }>`SELECT max(migration_id) AS latest FROM effect_sql_migrations`.pipe(
          Effect.timeout("2 seconds"),
          Effect.mapError(() => notReady("The database is not reachable.")),
          Effect.flatMap(([row]) =>
            (row?.latest ?? 0) >= latestMigrationId
              ? Effect.succeed({ status: "ready" as const, database: "ok", migrations: row?.latest ?? 0 })
              : Effect.fail(notReady("Migrations are not all applied."))
          )
        ))
  }))
