// Baseline (b): an @effect/platform HttpApi endpoint answering the same fixed JSON: the framework's ceiling.
import { createServer } from "node:http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpServer } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { fixedDocument } from "./fixed.js"

const Fixed = Schema.Struct({
  schema: Schema.String,
  items: Schema.Array(Schema.Struct({ id: Schema.String, value: Schema.String, n: Schema.Number }))
})

class BaselineApi extends HttpApi.make("baseline").add(
  HttpApiGroup.make("fixed").add(HttpApiEndpoint.get("fixed", "/fixed").addSuccess(Fixed))
) {}

const FixedLive = HttpApiBuilder.group(BaselineApi, "fixed", (handlers) =>
  handlers.handle("fixed", () => Effect.succeed(fixedDocument)))

const Banner = Layer.effectDiscard(Effect.gen(function*() {
  const server = yield* HttpServer.HttpServer
  if (server.address._tag === "TcpAddress") console.log(`listening on http://127.0.0.1:${server.address.port}`)
}))

HttpApiBuilder.serve().pipe(
  Layer.provide(HttpApiBuilder.api(BaselineApi).pipe(Layer.provide(FixedLive))),
  Layer.provideMerge(Banner),
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
  Layer.launch,
  NodeRuntime.runMain
)
