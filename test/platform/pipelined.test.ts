import { Deferred, Effect, Exit, Layer, ManagedRuntime } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createMigratedDatabase, testDatabaseLayers } from "../support/templates.js"

/**
 * The service's PostgreSQL client (platform/Database.ts) pipelines statements outside transactions on shared
 * connections. Against a real PostgreSQL: statements are pipelined (fewer connections than statements in flight),
 * one failing statement fails alone, and a transaction keeps its connection, its isolation and its rollback.
 */
describe("the pipelined PostgreSQL client (platform/Database.ts)", () => {
  let drop: () => Promise<void>
  let runtime: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>
  const run = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) => runtime.runPromise(effect)

  beforeAll(async () => {
    const database = await createMigratedDatabase()
    drop = database.drop
    runtime = ManagedRuntime.make(Layer.orDie(testDatabaseLayers({ DATABASE_URL: database.url })) as Layer.Layer<SqlClient.SqlClient>)
    await run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE pipelined_t (n int PRIMARY KEY)`))
  }, 120_000)
  afterAll(async () => {
    await runtime?.dispose()
    await drop?.()
  })

  it("keeps many statements in flight on few connections", async () => {
    const statements = 48
    const backends = await run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const answers = yield* Effect.forEach(
        Array.from({ length: statements }, (_, i) => i),
        () => sql<{ pid: number }>`SELECT pg_backend_pid() AS pid, pg_sleep(0.05)`,
        { concurrency: "unbounded" }
      )
      return new Set(answers.map((rows) => rows[0]!.pid)).size
    }))
    // One statement per connection would have opened the pool's 16.
    expect(backends).toBeLessThanOrEqual(4)
  })

  it("fails a failing statement alone, the ones pipelined with it succeed and commit", async () => {
    const exits = await run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* Effect.forEach([1, 2, 0, 3, 4], (n) =>
        Effect.exit(n === 0 ? sql`SELECT 1 / 0` : sql`INSERT INTO pipelined_t (n) VALUES (${n})`), { concurrency: "unbounded" })
    }))
    expect(exits.map(Exit.isSuccess)).toEqual([true, true, false, true, true])
    const rows = await run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT n FROM pipelined_t ORDER BY n`))
    expect(rows.map((r) => r.n)).toEqual([1, 2, 3, 4])
  })

  it("rolls a failed transaction back whole while pipelined statements around it commit, and hides its writes until then", async () => {
    const outcome = await run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const written = yield* Deferred.make<void>()
      const outsideDone = yield* Deferred.make<ReadonlyArray<number>>()
      // Forked outside the transaction (a fiber forked inside it would inherit its connection), started once the
      // transaction has written: pipelined meanwhile on the shared connections, these neither see the uncommitted
      // row nor land in the transaction.
      yield* Deferred.await(written).pipe(
        Effect.andThen(Effect.forEach([11, 12, 13], (n) =>
          Effect.andThen(sql<{ c: number }>`SELECT count(*)::int AS c FROM pipelined_t WHERE n = 10`, (rows) =>
            Effect.as(sql`INSERT INTO pipelined_t (n) VALUES (${n})`, rows[0]!.c)), { concurrency: "unbounded" })),
        Effect.flatMap((seen) => Deferred.succeed(outsideDone, seen)),
        Effect.forkChild
      )
      const transaction = sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO pipelined_t (n) VALUES (10)`
        const inside = yield* sql<{ c: number }>`SELECT count(*)::int AS c FROM pipelined_t WHERE n = 10`
        yield* Deferred.succeed(written, undefined)
        yield* Deferred.await(outsideDone)
        yield* sql`INSERT INTO pipelined_t (n) VALUES (1)` // a duplicate key: the transaction fails here
        return inside[0]!.c
      }))
      const exit = yield* Effect.exit(transaction)
      return { exit, seenOutside: yield* Deferred.await(outsideDone) }
    }))
    expect(Exit.isFailure(outcome.exit)).toBe(true)
    expect(outcome.seenOutside).toEqual([0, 0, 0])
    const rows = await run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT n FROM pipelined_t WHERE n >= 10 ORDER BY n`))
    expect(rows.map((r) => r.n)).toEqual([11, 12, 13])
  })

  it("commits a transaction's statements together, on one connection", async () => {
    const pids = await run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql.withTransaction(Effect.forEach([20, 21, 22], (n) =>
        Effect.andThen(sql`INSERT INTO pipelined_t (n) VALUES (${n})`, sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`)))
    }))
    expect(new Set(pids.map((rows) => rows[0]!.pid)).size).toBe(1)
    const rows = await run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT n FROM pipelined_t WHERE n >= 20 ORDER BY n`))
    expect(rows.map((r) => r.n)).toEqual([20, 21, 22])
  })
})
