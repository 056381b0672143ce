// Baseline (b'): what a careful Effect engineer writes for GET /machine. An HttpApi endpoint with a path
// parameter behind an `HttpApiSecurity.bearer` middleware that looks the key's SHA-256 up in a Map, answering a
// fixed document of the trust document's size through its success schema (the service's own
// MachineTrustResponse). Built from the same `effect` as the service; tracing and the request logger off.
// The document is read from BENCH_DOCUMENT_FILE (a trust document the service answered); the accepted key is
// BENCH_KEY. `--workers N` processes (default 1), like the service's.
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Context, Effect, Layer, Redacted, References, Schema } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiError, HttpApiGroup, HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import { NetAddress } from "effect/net"
import { MachineTrustResponse } from "../../src/domain/MachineTrust.js"
import { runBaseline } from "./cluster.js"

const document = Schema.decodeUnknownSync(MachineTrustResponse)(JSON.parse(readFileSync(process.env.BENCH_DOCUMENT_FILE!, "utf8")))
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")
const keys = new Map([[sha256(process.env.BENCH_KEY!), { tenant_id: "bench" }]])

class Caller extends Context.Service<Caller, { readonly tenant_id: string }>()("bench/Caller") {}

class Bearer extends HttpApiMiddleware.Service<Bearer, { provides: Caller }>()("bench/Bearer", {
  error: HttpApiError.Unauthorized,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

const BearerLive = Layer.succeed(Bearer, {
  bearer: (effect, { credential }) => {
    const caller = keys.get(sha256(Redacted.value(credential)))
    return caller === undefined ? Effect.fail(new HttpApiError.Unauthorized({})) : Effect.provideService(effect, Caller, caller)
  }
})

class BaselineApi extends HttpApi.make("baseline").add(
  HttpApiGroup.make("trust").add(
    HttpApiEndpoint.get("machine", "/api/v1/trust/:publicId/machine", { params: { publicId: Schema.String }, success: MachineTrustResponse })
  ).middleware(Bearer)
) {}

const TrustLive = HttpApiBuilder.group(BaselineApi, "trust", (handlers) =>
  handlers.handle("machine", () => Effect.succeed(document)))

runBaseline((banner) => {
  const Banner = Layer.effectDiscard(Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    if (NetAddress.isInetAddress(server.address)) banner(server.address.port)
  }))
  HttpRouter.serve(HttpApiBuilder.layer(BaselineApi).pipe(Layer.provide(TrustLive), Layer.provide(BearerLive)), {
    disableLogger: true,
    disableListenLog: true
  }).pipe(
    Layer.provideMerge(Banner),
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
    Layer.provide(Layer.succeed(References.TracerEnabled, false)),
    Layer.launch,
    NodeRuntime.runMain
  )
})
