// Baseline (r'): what a careful Effect engineer writes for POST /reliance-receipts, new receipts only. (b')'s
// HttpApi and `HttpApiSecurity.bearer` middleware (the key's SHA-256 looked up in a Map), a POST endpoint whose
// payload is decoded by HttpApi through the service's own request schema (RelianceRequest) and whose answer is
// encoded by HttpApi through the service's NewRelianceReceipt (status 201). The handler does a new receipt's work
// as written plainly in ./receiptWork.ts. What it leaves out of the service's work: rate limits, request ids,
// access log, metrics, CORS, the body checks of the front door, replays, the log's integration, the group commit.
// DATABASE_URL: a database of its own (it creates its two tables); BENCH_KEY: the accepted key.
import { Effect, Layer, Result } from "effect"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiError, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { NewRelianceReceipt, RelianceRequest } from "../../src/domain/Receipt.js"
import { Bearer, BearerLive, Caller, serveBaseline } from "./bearer.js"
import { makeReceiptWork, ReceiptWorkLive } from "./receiptWork.js"

class BaselineApi extends HttpApi.make("baseline").add(
  HttpApiGroup.make("receipts").add(
    HttpApiEndpoint.post("create", "/api/v1/reliance-receipts", {
      payload: RelianceRequest,
      success: NewRelianceReceipt.pipe(HttpApiSchema.status(201)),
      error: [HttpApiError.Forbidden, HttpApiError.NotFound, HttpApiError.Conflict]
    })
  ).middleware(Bearer)
) {}

const ReceiptsLive = HttpApiBuilder.group(BaselineApi, "receipts", Effect.fnUntraced(function*(handlers) {
  const work = yield* makeReceiptWork
  return handlers.handle("create", ({ payload }) =>
    Effect.gen(function*() {
      const caller = yield* Caller
      const made = yield* work(caller.tenant_id, payload)
      if (Result.isSuccess(made)) return { ...made.success, idempotent: false as const }
      return yield* made.failure === "not-found"
        ? new HttpApiError.NotFound({})
        : made.failure === "conflict" ? new HttpApiError.Conflict({}) : new HttpApiError.Forbidden({})
    }))
}))

serveBaseline(HttpApiBuilder.layer(BaselineApi).pipe(
  Layer.provide(ReceiptsLive),
  Layer.provide(BearerLive),
  Layer.provide(ReceiptWorkLive)
))
