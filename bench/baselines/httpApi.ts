// Baseline (b): an Effect 4 HttpApi endpoint (effect/http-api, served by @effect/platform-node's
// NodeHttpServer) answering the same fixed JSON: the framework's ceiling. Tracing and the request logger
// are off, as nothing here would read them. `--workers N` processes (default 1), like the service's.
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, References, Schema } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { NetAddress } from "effect/net"
import { runBaseline } from "./cluster.js"
import { fixedDocument } from "./fixed.js"

const Fixed = Schema.Struct({
  schema: Schema.String,
  items: Schema.Array(Schema.Struct({ id: Schema.String, value: Schema.String, n: Schema.Number }))
})

class BaselineApi extends HttpApi.make("baseline").add(
  HttpApiGroup.make("fixed").add(HttpApiEndpoint.get("fixed", "/fixed", { success: Fixed }))
) {}

const FixedLive = HttpApiBuilder.group(BaselineApi, "fixed", (handlers) =>
  handlers.handle("fixed", () => Effect.succeed(fixedDocument)))

runBaseline((banner) => {
  const Banner = Layer.effectDiscard(Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    if (NetAddress.isInetAddress(server.address)) banner(server.address.port)
  }))
  HttpRouter.serve(HttpApiBuilder.layer(BaselineApi).pipe(Layer.provide(FixedLive)), { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provideMerge(Banner),
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
    Layer.provide(Layer.succeed(References.TracerEnabled, false)),
    Layer.launch,
    NodeRuntime.runMain
  )
})
