import { readFile } from "node:fs/promises"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { PgClient } from "@effect/sql-pg/PgClient"
import { Context, Effect, FileSystem, Path, Schema, Scope, Stdio, Terminal } from "effect"
import { HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiSchema } from "effect/http-api"
import { NetAddress } from "effect/net"
import { ChildProcessSpawner } from "effect/process/ChildProcessSpawner"
import { SqlClient } from "effect/sql/SqlClient"
import { describe, expect, it } from "vitest"
import {
  isBuildTimeOnlyKey,
  problemJsonEncoding,
  scalarScriptModule,
  setMemoisedText,
  withLiveAddress,
  withoutBuildTimeServices
} from "../../src/domain/EffectInternals.js"

/**
 * Each behaviour of `effect` (and @effect/platform-node) outside their public API that src/domain/EffectInternals.ts
 * relies on, one test per internal, named after it: an upgrade that changes one fails here, by name.
 */
describe("effect internals the service relies on (domain/EffectInternals.ts)", () => {
  it("Context.mapUnsafe: a context's services by key string, and Context.makeUnsafe from such a map", () => {
    const Own = Context.Service<{ readonly n: number }>("pv/Own")
    const Kept = Context.Service<{ readonly n: number }>("other/Kept")
    const context = Context.make(Own, { n: 1 }).pipe(Context.add(Kept, { n: 2 }), Context.add(FileSystem.FileSystem, {} as FileSystem.FileSystem))
    expect([...context.mapUnsafe.keys()].sort()).toEqual(["effect/FileSystem", "other/Kept", "pv/Own"])
    const trimmed = withoutBuildTimeServices(context)
    expect([...trimmed.mapUnsafe.keys()]).toEqual(["other/Kept"])
    expect(Context.get(trimmed, Kept)).toEqual({ n: 2 })
    expect(Context.getOption(trimmed, Own)._tag).toBe("None")
  })

  it("service key strings: the build-time-only services' keys", () => {
    const keys = [PgClient.key, SqlClient.key, FileSystem.FileSystem.key, Path.Path.key, Stdio.Stdio.key, Terminal.Terminal.key, ChildProcessSpawner.key]
    expect(keys).toEqual([
      "@effect/sql-pg/PgClient",
      "effect/sql/SqlClient",
      "effect/FileSystem",
      "effect/Path",
      "~effect/Stdio",
      "effect/Terminal",
      "effect/process/ChildProcessSpawner"
    ])
    for (const key of keys) expect(isBuildTimeOnlyKey(key)).toBe(true)
    expect(isBuildTimeOnlyKey(HttpServerRequest.HttpServerRequest.key)).toBe(false)
  })

  it("defineProperty on HttpServer: address is a replaceable property that readers read when they ask", async () => {
    let port = 1
    const server = HttpServer.make({ address: NetAddress.inetAddressFromIpStringUnsafe("0.0.0.0", 0), serve: () => Effect.void })
    withLiveAddress(server, () => NetAddress.inetAddressFromIpStringUnsafe("127.0.0.1", port))
    port = 4321
    const read = await Effect.runPromise(Effect.map(Effect.service(HttpServer.HttpServer), (served) => served.address).pipe(Effect.provideService(HttpServer.HttpServer, server)))
    expect(read).toEqual(NetAddress.inetAddressFromIpStringUnsafe("127.0.0.1", 4321))
  })

  it("NodeHttpIncomingMessage.textEffect: the private field a request's text getter memoises its read in", async () => {
    const app = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const stored = setMemoisedText(request, Effect.succeed("from the field"))
      return Effect.flatMap(request.text, (text) => {
        const again = setMemoisedText(request, Effect.succeed("not stored"))
        return Effect.map(request.text, (second) => HttpServerResponse.text(`${stored} ${text} ${again} ${second}`))
      })
    })
    const answer = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const handler = yield* NodeHttpServer.makeHandler(app, { scope: yield* Scope.Scope })
      const server = Http.createServer(handler)
      yield* Effect.addFinalizer(() => Effect.sync(() => server.close()))
      yield* Effect.callback<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void)))
      const { port } = server.address() as AddressInfo
      return yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/`, { method: "POST", body: "the body" }).then((r) => r.text()))
    })))
    expect(answer).toBe("true from the field false from the field")
  })

  it("~httpApiEncoding: the annotation HttpApiSchema.asJson writes", () => {
    const annotated = HttpApiSchema.asJson({ contentType: "application/problem+json" })(Schema.String)
    expect(annotated.ast.annotations?.["~httpApiEncoding"]).toEqual(problemJsonEncoding["~httpApiEncoding"])
  })

  it("effect/http-api/internal/httpApiScalar.js: the module that exports Scalar's script as one JSON string literal", async () => {
    const text = await readFile(scalarScriptModule(), "utf8")
    const marker = "export const javascript="
    const start = text.indexOf(marker)
    const end = text.lastIndexOf("\";")
    expect(start).toBeGreaterThanOrEqual(0)
    expect(typeof JSON.parse(text.slice(start + marker.length, end + 1))).toBe("string")
  })
})
