import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { requireScope } from "../access/ApiKeys.js"
import { Api } from "../api/Api.js"
import { decodeRelianceRequest } from "../domain/Receipt.js"
import { Receipts } from "./Receipts.js"

/** The edge decodes: prohibited fields first (one error each), then the 7-field schema with pointers. */
const decodeRequest = (payload: unknown) => Effect.fromResult(decodeRelianceRequest(payload))

/** Stored receipts are sent as stored (not re-encoded), so their JSON never changes after the fact. */
export const ReceiptsHttpLive = HttpApiBuilder.group(Api, "receipts", (handlers) =>
  Effect.gen(function*() {
    const receipts = yield* Receipts
    const respond = (receipt: object, status: number) =>
      HttpServerResponse.text(receipts.jsonOf(receipt), { status, contentType: "application/json" })
    return handlers
      .handle("create", ({ payload }) =>
        requireScope("receipt:write").pipe(
          Effect.flatMap((key) => Effect.flatMap(decodeRequest(payload), (request) => receipts.create(key.tenant_id, request))),
          Effect.map((receipt) => respond(receipt, receipt.idempotent ? 200 : 201))
        ))
      .handle("get", ({ params }) =>
        requireScope("receipt:read").pipe(
          Effect.flatMap((key) => receipts.get(key.tenant_id, params.receiptId)),
          Effect.map((receipt) => respond(receipt, 200))
        ))
      .handle("proof", ({ params }) =>
        requireScope("receipt:read").pipe(
          Effect.flatMap((key) => receipts.proof(key.tenant_id, params.receiptId)),
          Effect.map((bundle) => HttpServerResponse.text(JSON.stringify(bundle), { status: 200, contentType: "application/json" }))
        ))
      .handle("evaluate", ({ payload }) =>
        requireScope("actionability:read").pipe(
          Effect.flatMap((key) => Effect.flatMap(decodeRequest(payload), (request) => receipts.evaluate(key.tenant_id, request)))
        ))
      .handle("policy", () => Effect.succeed(receipts.policy))
  }))
