import { Effect, Schema } from "effect"
import * as SqlSchema from "effect/sql/SqlSchema"

/**
 * Reading rows through schemas. Rows are what this code wrote: one that does not fit its schema is a
 * defect of the store (a 500), never a request error, while a failed statement (`SqlError`) stays typed.
 *
 * Queries are `effect/sql` `SqlSchema` functions (request schema, result schema, statement) with their
 * `SchemaError` turned into a defect. Build each once (in a repository's `make`): building compiles the
 * decoders. Encoding the request adds 0.05–0.3 µs per query over decoding the rows alone
 * (`npm run -s bench:sql-schema`, docs/EFFECT4-PORT.md §5); the rows are decoded the same way.
 */

const schemaErrorIsDefect = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, Exclude<E, Schema.SchemaError>, R> =>
  Effect.catchIf(self, Schema.isSchemaError, Effect.die) as Effect.Effect<A, Exclude<E, Schema.SchemaError>, R>

type Query<Req extends Schema.Constraint, Res extends Schema.Constraint, E, R> = {
  readonly Request: Req
  readonly Result: Res
  readonly execute: (request: Req["Encoded"]) => Effect.Effect<ReadonlyArray<unknown>, E, R>
}

/** Every row, decoded. */
export const findAll = <Req extends Schema.Constraint, Res extends Schema.Constraint, E, R>(options: Query<Req, Res, E, R>) => {
  const find = SqlSchema.findAll(options)
  return (request: Req["Type"]) => schemaErrorIsDefect(find(request))
}

/** The first row, decoded, or none. */
export const findOneOption = <Req extends Schema.Constraint, Res extends Schema.Constraint, E, R>(options: Query<Req, Res, E, R>) => {
  const find = SqlSchema.findOneOption(options)
  return (request: Req["Type"]) => schemaErrorIsDefect(find(request))
}

/** A query without parameters: every row, decoded (build it once, like the others). */
export const all = <Res extends Schema.Constraint, E, R>(Result: Res, query: Effect.Effect<ReadonlyArray<unknown>, E, R>) =>
  findAll({ Request: Schema.Void, Result, execute: () => query })(undefined)

/**
 * A statement whose parameters are a batch of rows (the receipts' group insert, on the create path):
 * its answer through one precompiled decoder, without encoding the batch, which `SqlSchema` would do
 * field by field for every row of it.
 */
export const batchRows = <S extends Schema.Codec<any, any>>(schema: S) => {
  const decode = Schema.decodeUnknownEffect(Schema.Array(schema))
  return <E, R>(query: Effect.Effect<ReadonlyArray<unknown>, E, R>): Effect.Effect<ReadonlyArray<S["Type"]>, E, R> =>
    Effect.flatMap(query, (rows) => Effect.orDie(decode(rows)))
}
