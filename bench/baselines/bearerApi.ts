// Baseline (b'): what a careful Effect engineer writes for GET /machine. An HttpApi endpoint with a path
// parameter behind an `HttpApiSecurity.bearer` middleware that looks the key's SHA-256 up in a Map, answering a
// fixed document of the trust document's size through its success schema (the service's own
// MachineTrustResponse). Built from the same `effect` as the service; tracing and the request logger off.
// The document is read from BENCH_DOCUMENT_FILE (a trust document the service answered); the accepted key is
// BENCH_KEY. `--workers N` processes (default 1), like the service's.
import { readFileSync } from "node:fs"
import { Effect, Layer, Schema } from "effect"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { MachineTrustResponse } from "../../src/domain/MachineTrust.js"
import { Bearer, BearerLive, serveBaseline } from "./bearer.js"

const document = Schema.decodeUnknownSync(MachineTrustResponse)(JSON.parse(readFileSync(process.env.BENCH_DOCUMENT_FILE!, "utf8")))

class BaselineApi extends HttpApi.make("baseline").add(
  HttpApiGroup.make("trust").add(
    HttpApiEndpoint.get("machine", "/api/v1/trust/:publicId/machine", { params: { publicId: Schema.String }, success: MachineTrustResponse })
  ).middleware(Bearer)
) {}

const TrustLive = HttpApiBuilder.group(BaselineApi, "trust", (handlers) =>
  handlers.handle("machine", () => Effect.succeed(document)))

serveBaseline(HttpApiBuilder.layer(BaselineApi).pipe(Layer.provide(TrustLive), Layer.provide(BearerLive)))
