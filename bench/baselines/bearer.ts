// What the HttpApi baselines (b') and (r') share: an `HttpApiSecurity.bearer` middleware that looks the key's
// SHA-256 up in a Map (the one key accepted is BENCH_KEY, of tenant "bench"), and how they are served (the
// platform's Node server on a free port of 127.0.0.1, tracing and the request logger off, `--workers N` processes
// like the service's, the banner `listening on http://…` once every process listens).
import { createHash } from "node:crypto"
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import type * as NodeServices from "@effect/platform-node/NodeServices"
import { Context, Effect, Layer, Redacted, References } from "effect"
import { type Etag, type HttpPlatform, HttpRouter, HttpServer } from "effect/http"
import { HttpApiError, HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import { NetAddress } from "effect/net"
import { runBaseline } from "./cluster.js"

export const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")
const keys = new Map([[sha256(process.env.BENCH_KEY!), { tenant_id: "bench" }]])

export class Caller extends Context.Service<Caller, { readonly tenant_id: string }>()("bench/Caller") {}

export class Bearer extends HttpApiMiddleware.Service<Bearer, { provides: Caller }>()("bench/Bearer", {
  error: HttpApiError.Unauthorized,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

export const BearerLive = Layer.succeed(Bearer, {
  bearer: (effect, { credential }) => {
    const caller = keys.get(sha256(Redacted.value(credential)))
    return caller === undefined ? Effect.fail(new HttpApiError.Unauthorized({})) : Effect.provideService(effect, Caller, caller)
  }
})

/** What the platform's Node server provides to the app it serves. */
type Served = HttpRouter.HttpRouter | HttpServer.HttpServer | NodeServices.NodeServices | HttpPlatform.HttpPlatform | Etag.Generator

/** Serves `app` (an `HttpApiBuilder.layer` with its groups and BearerLive provided) until the process is stopped. */
export const serveBaseline = <E>(app: Layer.Layer<never, E, Served>): void =>
  runBaseline((banner) => {
    const Banner = Layer.effectDiscard(Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      if (NetAddress.isInetAddress(server.address)) banner(server.address.port)
    }))
    HttpRouter.serve(app, { disableLogger: true, disableListenLog: true }).pipe(
      Layer.provideMerge(Banner),
      Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
      Layer.provide(Layer.succeed(References.TracerEnabled, false)),
      Layer.launch,
      NodeRuntime.runMain
    )
  })
