import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { requireScope } from "../access/ApiKeys.js"
import { Api } from "../http/Api.js"
import { Receipts } from "./Receipts.js"

/** Stored receipts are sent as stored (not re-encoded), so their JSON never changes after the fact. */
export const ReceiptsHttpLive = HttpApiBuilder.group(Api, "receipts", (handlers) =>
  Effect.gen(function*() {
    const receipts = yield* Receipts
    return handlers
      .handle("create", ({ payload }) =>
        requireScope("receipt:write").pipe(
          Effect.flatMap((key) => receipts.create(key.tenant_id, payload)),
          Effect.map((receipt) => HttpServerResponse.unsafeJson(receipt, { status: receipt.idempotent ? 200 : 201 }))
        ))
      .handle("get", ({ path }) =>
        requireScope("receipt:read").pipe(
          Effect.flatMap((key) => receipts.get(key.tenant_id, path.receiptId)),
          Effect.map((receipt) => HttpServerResponse.unsafeJson(receipt))
        ))
      .handle("evaluate", ({ payload }) =>
        requireScope("actionability:read").pipe(Effect.flatMap((key) => receipts.evaluate(key.tenant_id, payload))))
      .handle("policy", () => Effect.succeed(receipts.policy))
  }))
