import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { requireScope } from "../access/ApiKeys.js"
import { Api } from "../http/Api.js"
import { Receipts } from "./Receipts.js"

// Receipts never change: the JSON of a receipt object (a cached read or the shared replay answer) is
// built once, however often it is sent.
const serialised = new WeakMap<object, string>()
const jsonOf = (receipt: object): string => {
  let text = serialised.get(receipt)
  if (text === undefined) {
    text = JSON.stringify(receipt)
    serialised.set(receipt, text)
  }
  return text
}

const respond = (receipt: object, status: number) => HttpServerResponse.text(jsonOf(receipt), { status, contentType: "application/json" })

/** Stored receipts are sent as stored (not re-encoded), so their JSON never changes after the fact. */
export const ReceiptsHttpLive = HttpApiBuilder.group(Api, "receipts", (handlers) =>
  Effect.gen(function*() {
    const receipts = yield* Receipts
    return handlers
      .handle("create", ({ payload }) =>
        requireScope("receipt:write").pipe(
          Effect.flatMap((key) => receipts.create(key.tenant_id, payload)),
          Effect.map((receipt) => respond(receipt, receipt.idempotent ? 200 : 201))
        ))
      .handle("get", ({ path }) =>
        requireScope("receipt:read").pipe(
          Effect.flatMap((key) => receipts.get(key.tenant_id, path.receiptId)),
          Effect.map((receipt) => respond(receipt, 200))
        ))
      .handle("proof", ({ path }) =>
        requireScope("receipt:read").pipe(
          Effect.flatMap((key) => receipts.proof(key.tenant_id, path.receiptId)),
          Effect.map((bundle) => HttpServerResponse.text(JSON.stringify(bundle), { status: 200, contentType: "application/json" }))
        ))
      .handle("evaluate", ({ payload }) =>
        requireScope("actionability:read").pipe(Effect.flatMap((key) => receipts.evaluate(key.tenant_id, payload))))
      .handle("policy", () => Effect.succeed(receipts.policy))
  }))
