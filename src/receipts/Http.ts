import { Effect, Layer, SchemaAST } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiBuilder } from "effect/http-api"
import { Caller } from "../access/Auth.js"
import { Api } from "../api/Api.js"
import { checkedJsonOf } from "../api/Problems.js"
import { type CreatedRelianceReceipt, decodeRelianceRequest } from "../domain/Receipt.js"
import { withMiddlewaresOnly } from "../http/GroupContext.js"
import { Receipts } from "./Receipts.js"

/** The edge decodes: prohibited fields first (one error each), then the 7-field schema with pointers. */
const decodeRequest = (payload: unknown) => Effect.fromResult(decodeRelianceRequest(payload))

/**
 * The status of each POST answer by its `idempotent`, as the endpoint's success schemas declare it
 * (src/receipts/Api.ts: NewRelianceReceipt 201, ReplayedRelianceReceipt 200), read once when the layer is built.
 */
export const createdStatuses = (): { readonly stored: number; readonly replayed: number } => {
  const byIdempotent = new Map<unknown, number>()
  HttpApi.reflect(Api, {
    predicate: ({ endpoint, group }) => group.identifier === "receipts" && endpoint.identifier === "create",
    onGroup: () => {},
    onEndpoint: ({ successes }) => {
      for (const [status, schemas] of successes) {
        for (const schema of schemas) {
          const ast = SchemaAST.toType(schema.ast)
          const member = ast._tag === "Objects" ? ast.propertySignatures.find((p) => p.name === "idempotent") : undefined
          if (member?.type._tag === "Literal") byIdempotent.set(member.type.literal, status)
        }
      }
    }
  })
  const stored = byIdempotent.get(false)
  const replayed = byIdempotent.get(true)
  if (stored === undefined || replayed === undefined) {
    throw new Error("POST /reliance-receipts must declare a success schema for `idempotent: false` and one for `idempotent: true`")
  }
  return { stored, replayed }
}

/**
 * Every receipt body is encoded through its endpoint's success schema in Receipts (jsonOf, createdJsonOf once
 * per receipt, proofJsonOf per bundle), which also decides what a stored receipt that no longer fits is sent
 * as. POST sends those bytes itself, with the status its declared schemas give the receipt's `idempotent`
 * (HttpApi would encode the receipt again on every request to find it; see docs/EFFECT4-PORT.md).
 * The scope of each endpoint is checked by ApiKeyAuth (its RequiredScope); handlers act for the `Caller`'s tenant.
 */
export const ReceiptsHttpLive = Layer.unwrap(Effect.gen(function*() {
  const receipts = yield* Receipts
  const statuses = createdStatuses()
  const respond = (status: number) => (json: string) => HttpServerResponse.text(json, { status, contentType: "application/json" })
  // A replay's answer object is shared by every replay of its receipt (Receipts.create), so its response is
  // too (responses are immutable; each request's headers are added to its own copy).
  const replays = new WeakMap<CreatedRelianceReceipt, HttpServerResponse.HttpServerResponse>()
  const respondCreated = (receipt: CreatedRelianceReceipt): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    if (!receipt.idempotent) return Effect.map(receipts.createdJsonOf(receipt), respond(statuses.stored))
    const known = replays.get(receipt)
    return known !== undefined ? Effect.succeed(known) : Effect.map(receipts.createdJsonOf(receipt), (json) => {
      const response = respond(statuses.replayed)(json)
      replays.set(receipt, response)
      return response
    })
  }
  // Built with its middlewares only: see http/GroupContext.ts.
  return withMiddlewaresOnly(HttpApiBuilder.group(Api, "receipts", (handlers) =>
    handlers
      // Raw only so the body the guard parsed is not parsed and schema-decoded again (its payload schema is any
      // JSON value): the order of checks is the decoded endpoint's (key, limits and scope, then the body, then the request).
      .handleRaw("create", ({ request }) =>
        Effect.flatMap(checkedJsonOf(request), (payload) =>
          Effect.flatMap(Caller, (key) =>
            Effect.flatMap(decodeRequest(payload), (decoded) => Effect.flatMap(receipts.create(key.tenant_id, decoded), respondCreated)))))
      .handle("get", ({ params }) =>
        Effect.flatMap(Caller, (key) =>
          Effect.flatMap(receipts.get(key.tenant_id, params.receiptId), (receipt) => Effect.map(receipts.jsonOf(receipt), respond(200)))))
      .handle("proof", ({ params }) =>
        Effect.flatMap(Caller, (key) =>
          Effect.flatMap(receipts.proof(key.tenant_id, params.receiptId), (bundle) => Effect.map(receipts.proofJsonOf(bundle), respond(200)))))
      .handle("evaluate", ({ payload }) =>
        Effect.flatMap(Caller, (key) => Effect.flatMap(decodeRequest(payload), (request) => receipts.evaluate(key.tenant_id, request))))
      .handle("policy", () => Effect.succeed(receipts.policy))))
}))
