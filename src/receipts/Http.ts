import { Effect, Layer } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { requireScope } from "../access/ApiKeys.js"
import { Api } from "../api/Api.js"
import { checkedJsonOf } from "../api/Problems.js"
import { type CreatedRelianceReceipt, decodeRelianceRequest } from "../domain/Receipt.js"
import { withMiddlewaresOnly } from "../http/GroupContext.js"
import { Receipts } from "./Receipts.js"

/** The edge decodes: prohibited fields first (one error each), then the 7-field schema with pointers. */
const decodeRequest = (payload: unknown) => Effect.fromResult(decodeRelianceRequest(payload))

/**
 * Every receipt body is encoded through its endpoint's success schema in Receipts (jsonOf, createdJsonOf once
 * per receipt, proofJsonOf per bundle), which also decides what a stored receipt that no longer fits is sent
 * as. POST needs its own response anyway: its two successes share one schema, and HttpApi would pick the
 * first (201) for a replay too.
 */
export const ReceiptsHttpLive = Layer.unwrap(Effect.gen(function*() {
  const receipts = yield* Receipts
  const respond = (status: number) => (json: string) => HttpServerResponse.text(json, { status, contentType: "application/json" })
  // A replay's answer object is shared by every replay of its receipt (Receipts.create), so its response is
  // too (responses are immutable; each request's headers are added to its own copy).
  const replays = new WeakMap<CreatedRelianceReceipt, HttpServerResponse.HttpServerResponse>()
  const respondCreated = (receipt: CreatedRelianceReceipt): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    if (!receipt.idempotent) return Effect.map(receipts.createdJsonOf(receipt), respond(201))
    const known = replays.get(receipt)
    return known !== undefined ? Effect.succeed(known) : Effect.map(receipts.createdJsonOf(receipt), (json) => {
      const response = respond(200)(json)
      replays.set(receipt, response)
      return response
    })
  }
  // Built with its middlewares only: see http/GroupContext.ts.
  return withMiddlewaresOnly(HttpApiBuilder.group(Api, "receipts", (handlers) =>
    handlers
      // Raw only so the body the guard parsed is not parsed and schema-decoded again (its payload schema is any
      // JSON value): the order of checks is the decoded endpoint's, body first, then the scope, then the request.
      .handleRaw("create", ({ request }) =>
        Effect.flatMap(checkedJsonOf(request), (payload) =>
          requireScope("receipt:write").pipe(
            Effect.flatMap((key) => Effect.flatMap(decodeRequest(payload), (decoded) => receipts.create(key.tenant_id, decoded))),
            Effect.flatMap(respondCreated)
          )))
      .handle("get", ({ params }) =>
        requireScope("receipt:read").pipe(
          Effect.flatMap((key) => receipts.get(key.tenant_id, params.receiptId)),
          Effect.flatMap((receipt) => Effect.map(receipts.jsonOf(receipt), respond(200)))
        ))
      .handle("proof", ({ params }) =>
        requireScope("receipt:read").pipe(
          Effect.flatMap((key) => receipts.proof(key.tenant_id, params.receiptId)),
          Effect.flatMap((bundle) => Effect.map(receipts.proofJsonOf(bundle), respond(200)))
        ))
      .handle("evaluate", ({ payload }) =>
        requireScope("actionability:read").pipe(
          Effect.flatMap((key) => Effect.flatMap(decodeRequest(payload), (request) => receipts.evaluate(key.tenant_id, request)))
        ))
      .handle("policy", () => Effect.succeed(receipts.policy))))
}))
