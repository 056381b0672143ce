import type { Context } from "effect"
import { Context as Ctx } from "effect"
import type { HttpServer, HttpServerRequest } from "effect/http"
import type { NetAddress } from "effect/net"

/**
 * Every use the service makes of what is not `effect`'s (or `@effect/platform-node`'s) public, documented API,
 * in one place. Each is here because the public way costs CPU on the hot request path or does not exist; each
 * behaviour relied on is pinned to the installed version by test/domain/effectInternals.test.ts, one test
 * named after each, so an upgrade that changes one fails there, by name.
 */

/** Services the app takes only when its layers are built (see `withoutBuildTimeServices`), by their key strings. */
const BuildTimeOnly: ReadonlySet<string> = new Set([
  "@effect/sql-pg/PgClient",
  "effect/sql/SqlClient",
  "effect/FileSystem",
  "effect/Path",
  "~effect/Stdio",
  "effect/Terminal",
  "effect/process/ChildProcessSpawner"
])

/** Whether a service key is one of the app's own ("pv/…") or a build-time-only service of effect's. */
export const isBuildTimeOnlyKey = (key: string): boolean => key.startsWith("pv/") || BuildTimeOnly.has(key)

/**
 * INTERNAL: `Context.mapUnsafe` and services' key strings. The context every request starts from, without the
 * services taken only when layers are built (http/FrontDoor.ts explains why: a smaller context is merged on
 * every request). `Context.omit` would need every service's tag, the app's own ~30 among them.
 */
export const withoutBuildTimeServices = <R>(context: Context.Context<R>): Context.Context<R> =>
  Ctx.makeUnsafe<R>(new Map([...context.mapUnsafe].filter(([key]) => !isBuildTimeOnlyKey(key))))

/**
 * INTERNAL: `defineProperty` on an `HttpServer` value. `HttpServer.make` takes its address as a value, but the
 * real one (PORT=0 picks it) exists only once the port is open: `address` becomes a getter.
 */
export const withLiveAddress = (server: HttpServer.HttpServer["Service"], address: () => NetAddress.SocketAddress): void => {
  Object.defineProperty(server, "address", { get: address })
}

/**
 * INTERNAL: @effect/platform-node's request memoises its body's text in a private field, `textEffect`, that
 * its `text` getter returns once set. Stores `text` there when the field exists and is still unset (true), so
 * the pipeline goes on with the same request object; false otherwise (the caller makes a view instead).
 */
const TextField = "textEffect"
export const setMemoisedText = (request: HttpServerRequest.HttpServerRequest, text: unknown): boolean => {
  const fields = request as unknown as Record<string, unknown>
  if (!Object.hasOwn(fields, TextField) || fields[TextField] !== undefined) return false
  fields[TextField] = text
  return true
}

/**
 * INTERNAL: a "~"-key annotation. What `HttpApiSchema.asJson({ contentType })` writes, given to a
 * `Schema.Error` class in its own declaration (asJson returns a schema, not a class to extend).
 */
export const problemJsonEncoding = {
  "~httpApiEncoding": { _tag: "Json", contentType: "application/problem+json" }
} as const

/**
 * INTERNAL: a module under effect's `internal/` folder: the Scalar script `HttpApiScalar.layer` inlines, read
 * as text instead of imported (http/Docs.ts).
 */
export const scalarScriptModule = (): URL => new URL("./internal/httpApiScalar.js", import.meta.resolve("effect/http-api/HttpApiScalar"))
