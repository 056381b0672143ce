import { SqlError } from "effect/sql"

/**
 * The SQLSTATE of a failure PostgreSQL reported (the driver keeps the server's error fields on the
 * reason's `cause`); undefined for failures of the connection itself (refused, reset, timed out).
 */
export const sqlState = (error: SqlError.SqlError): string | undefined => {
  const code = (error.reason.cause as { readonly code?: unknown } | undefined)?.code
  return typeof code === "string" ? code : undefined
}

/**
 * How a request's database failure is answered. It is the client's when PostgreSQL refused the data
 * itself (SQLSTATE class 22, data exception: out-of-range integers, NUL, untranslatable characters), so it
 * is answered 422 and never mistaken for an outage; any other database failure means the database is
 * unavailable (503). Undefined when `error` is not a database failure.
 */
export const databaseFailure = (error: unknown): "input" | "unavailable" | undefined => {
  if (!SqlError.isSqlError(error)) return undefined
  return sqlState(error)?.startsWith("22") ? "input" : "unavailable"
}
