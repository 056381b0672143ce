import { Cause, Effect, Exit, Option, Schema } from "effect"
import { ConnectionError, SqlError } from "effect/sql/SqlError"
import { describe, expect, it } from "vitest"
import * as Rows from "../../src/platform/Rows.js"

/** A row that does not fit its schema is a defect of the store (a 500), a failed statement stays a typed SqlError. */
describe("rows read through schemas (platform/Rows.ts)", () => {
  const Row = Schema.Struct({ n: Schema.Int })
  const answering = (rows: ReadonlyArray<unknown>) => (_: number) => Effect.succeed(rows)
  const failing = (_: number) => Effect.fail(new SqlError({ reason: new ConnectionError({ cause: new Error("connection refused"), message: "down" }) }))

  it("decodes the rows, and the first row or none", async () => {
    expect(await Effect.runPromise(Rows.findAll({ Request: Schema.Number, Result: Row, execute: answering([{ n: 1 }, { n: 2 }]) })(0))).toEqual([{ n: 1 }, { n: 2 }])
    expect(await Effect.runPromise(Rows.findOneOption({ Request: Schema.Number, Result: Row, execute: answering([{ n: 3 }]) })(0))).toEqual(Option.some({ n: 3 }))
    expect(await Effect.runPromise(Rows.findOneOption({ Request: Schema.Number, Result: Row, execute: answering([]) })(0))).toEqual(Option.none())
    expect(await Effect.runPromise(Rows.all(Row, Effect.succeed([{ n: 4 }])))).toEqual([{ n: 4 }])
    expect(await Effect.runPromise(Rows.batchRows(Row)(Effect.succeed([{ n: 5 }])))).toEqual([{ n: 5 }])
  })

  it("makes a row that does not decode a defect, on every reader", async () => {
    const bad = [{ n: "1" }]
    const exits: Array<Exit.Exit<unknown, unknown>> = [
      await Effect.runPromiseExit(Rows.findAll({ Request: Schema.Number, Result: Row, execute: answering(bad) })(0)),
      await Effect.runPromiseExit(Rows.findOneOption({ Request: Schema.Number, Result: Row, execute: answering(bad) })(0)),
      await Effect.runPromiseExit(Rows.all(Row, Effect.succeed(bad))),
      await Effect.runPromiseExit(Rows.batchRows(Row)(Effect.succeed(bad)))
    ]
    for (const exit of exits) {
      expect(Exit.isFailure(exit) && Cause.hasDies(exit.cause) && !Cause.hasFails(exit.cause)).toBe(true)
    }
  })

  it("keeps a failed statement a typed SqlError", async () => {
    const exit = await Effect.runPromiseExit(Rows.findAll({ Request: Schema.Number, Result: Row, execute: failing })(0))
    expect(Exit.isFailure(exit) && Cause.hasFails(exit.cause) && !Cause.hasDies(exit.cause)).toBe(true)
    const error = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
    expect(Option.getOrUndefined(error)).toBeInstanceOf(SqlError)
  })
})
