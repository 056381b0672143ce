import { Effect, Layer, Option, Result } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Caller } from "../api/Auth.js"
import { groupApi } from "../api/GroupApi.js"
import { ReceiptsApi } from "./Api.js"
import { checkedJsonOf } from "../api/Problems.js"
import type { ProhibitedField, ValidationFailed } from "../domain/Problem.js"
import { type CreatedRelianceReceipt, decodeRelianceRequest, type RelianceReceipt, type RelianceRequest } from "../domain/Receipt.js"
import { FrontDoor } from "../http/FrontDoor.js"
import type { ReceiptProofBundle } from "../log/ReceiptProof.js"
import { withMiddlewaresOnly } from "../http/GroupContext.js"
import { preferredWaitSeconds } from "./PreferWait.js"
import { receiptAnswers } from "./ReceiptBodies.js"
import { type EvidenceFormat, Receipts } from "./Receipts.js"

/** The edge decodes: prohibited fields first (one error each), then the 7-field schema with pointers. */
const decodeRequest = (payload: unknown) => Effect.fromResult(decodeRelianceRequest(payload))

/**
 * `decodeRequest` for POST's checked body: a request decoded before from the same payload object (the guard
 * hands a key that sends a body again the value it checked the first time: http/RequestGuard.ts) is that
 * decoded request again. (Evaluate's payload is decoded by HttpApi, a new object each time: plain `decodeRequest`.)
 */
const decodePerPayload = () => {
  const decoded = new WeakMap<object, RelianceRequest>()
  return (payload: unknown): Effect.Effect<RelianceRequest, ProhibitedField | ValidationFailed> => {
    const keyed = typeof payload === "object" && payload !== null
    const known = keyed ? decoded.get(payload) : undefined
    if (known !== undefined) return Effect.succeed(known)
    const result = decodeRelianceRequest(payload)
    if (keyed && Result.isSuccess(result)) decoded.set(payload, result.success)
    return Effect.fromResult(result)
  }
}

/** The stored receipt of a POST answer, as GET (and so the proof bundle) shows it. */
const stripIdempotent = ({ idempotent: _, ...receipt }: CreatedRelianceReceipt): RelianceReceipt => receipt

/**
 * The Receipts service returns values; their bodies are written here, at the edge, by each endpoint's
 * declared success schema (ReceiptBodies.ts: POST's status and encoder by the answer's `idempotent`, a held
 * receipt's answer built once per receipt object). A stored receipt that no longer fits is sent as stored.
 * The scope of each endpoint is checked by ApiKeyAuth (its RequiredScope); handlers act for the `Caller`'s tenant.
 */
export const ReceiptsHttpLive = Layer.unwrap(Effect.gen(function*() {
  const receipts = yield* Receipts
  const answers = receiptAnswers()
  const decodeChecked = decodePerPayload()
  const evidenceOf = <F extends EvidenceFormat>(receiptId: string, format: F) =>
    Effect.flatMap(Caller, (key) =>
      Effect.map(receipts.evidence(key.tenant_id, receiptId, format), (evidence) =>
        evidence.body as F extends "tlog-proof" ? string : Uint8Array))
  const frontDoor = yield* FrontDoor
  /**
   * Prefer: wait: the receipt with its proof once it exists within `seconds`, else the plain answer. The wait
   * holds no connection; a drain (SIGTERM) ends it at once with the plain answer.
   */
  const answerWithin = (receipt: CreatedRelianceReceipt, seconds: number) =>
    Effect.race(receipts.proofWithin(stripIdempotent(receipt), seconds * 1000), Effect.as(frontDoor.stopping, Option.none<ReceiptProofBundle>())).pipe(
      Effect.flatMap(Option.match({
        onNone: () => answers.created(receipt),
        onSome: (proof) => answers.createdWithProof(receipt, proof, seconds)
      }))
    )
  // Built with its middlewares only: see http/GroupContext.ts.
  return withMiddlewaresOnly(HttpApiBuilder.group(groupApi(ReceiptsApi), "receipts", (handlers) =>
    handlers
      // Raw only so the body the guard parsed is not parsed and schema-decoded again (its payload schema is any
      // JSON value): the order of checks is the decoded endpoint's (key, limits and scope, then the body, then the request).
      .handleRaw("create", ({ request }) =>
        Effect.flatMap(checkedJsonOf(request), (payload) =>
          Effect.flatMap(Caller, (key) =>
            Effect.flatMap(decodeChecked(payload), (decoded) => {
              const created = receipts.create(key.tenant_id, decoded)
              const seconds = preferredWaitSeconds(request.headers["prefer"])
              if (seconds === undefined) return Effect.flatMap(created, answers.created)
              frontDoor.waitsOnPurpose(request)
              return Effect.flatMap(created, (receipt) => answerWithin(receipt, seconds))
            }))))
      .handle("get", ({ params }) =>
        Effect.flatMap(Caller, (key) =>
          Effect.flatMap(receipts.get(key.tenant_id, params.receiptId), answers.read)))
      .handle("proof", ({ params }) =>
        Effect.flatMap(Caller, (key) =>
          Effect.flatMap(receipts.proof(key.tenant_id, params.receiptId), answers.proof)))
      .handle("tlogProof", ({ params }) => evidenceOf(params.receiptId, "tlog-proof"))
      .handle("coseReceipt", ({ params }) => evidenceOf(params.receiptId, "cose-receipt"))
      .handle("transparentStatement", ({ params }) => evidenceOf(params.receiptId, "transparent-statement"))
      .handle("evaluate", ({ payload }) =>
        Effect.flatMap(Caller, (key) => Effect.flatMap(decodeRequest(payload), (request) => receipts.evaluate(key.tenant_id, request))))
      .handle("policy", () => Effect.succeed(receipts.policy))))
}))
