import { Effect, SchemaAST } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApi } from "effect/http-api"
import { groupApi } from "../api/GroupApi.js"
import { ReceiptsApi } from "./Api.js"
import { jsonTextEncoder } from "../domain/Json.js"
import { type CreatedRelianceReceipt, RelianceReceipt } from "../domain/Receipt.js"
import { ReceiptProofBundle } from "../log/Api.js"
import type { ReceiptProofBundle as ReceiptProofBundleValue } from "../log/ReceiptProof.js"

// The receipts' bodies at the HTTP edge: the Receipts service returns values, and each body is written here
// by its endpoint's declared success schema (src/receipts/Api.ts), kept per receipt object where that pays.

/**
 * The body through its schema. A stored receipt that does not fit was edited in the database after it was
 * written: it is sent as stored, with a warning, so the relying party's verification shows the edit (its
 * digest step fails) instead of a 500 hiding it (test/http/log.http.test.ts, "stored JSON was edited").
 */
const bodyOf = <A extends object>(encode: (value: A) => string, value: A): Effect.Effect<string> =>
  Effect.try({ try: () => encode(value), catch: (error) => error }).pipe(
    Effect.catch((error) =>
      Effect.as(Effect.logWarning("a stored receipt does not fit its schema: sent as stored", error), JSON.stringify(value)))
  )

/** A POST answer's value: the receipt, with its proof bundle when the request waited for it (Prefer: wait). */
type CreatedAnswerValue = CreatedRelianceReceipt & { readonly proof?: ReceiptProofBundleValue }

/** One POST answer kind: the status and the encoder of the success schema declared for it. */
interface CreatedAnswer {
  readonly status: number
  readonly encode: (value: CreatedAnswerValue) => string
}

/**
 * The success schemas POST /reliance-receipts declares (NewRelianceReceipt 201, ReplayedRelianceReceipt 200),
 * by the literal of their `idempotent` member, read from the API definition once: HttpApi itself would
 * encode each answer through the union of both to find its status (a replay fails the first member first).
 */
const createdAnswers = (): { readonly stored: CreatedAnswer; readonly replayed: CreatedAnswer } => {
  const byIdempotent = new Map<unknown, CreatedAnswer>()
  HttpApi.reflect(groupApi(ReceiptsApi), {
    predicate: ({ endpoint, group }) => group.identifier === "receipts" && endpoint.identifier === "create",
    onGroup: () => {},
    onEndpoint: ({ successes }) => {
      for (const [status, schemas] of successes) {
        for (const schema of schemas) {
          const ast = SchemaAST.toType(schema.ast)
          const member = ast._tag === "Objects" ? ast.propertySignatures.find((p) => p.name === "idempotent") : undefined
          if (member?.type._tag === "Literal") {
            byIdempotent.set(member.type.literal, { status, encode: jsonTextEncoder(schema as never) as (value: CreatedAnswerValue) => string })
          }
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

const json = (status: number) => (text: string) => HttpServerResponse.text(text, { status, contentType: "application/json" })

/**
 * The receipt endpoints' answers, made once per receipts layer. Receipts never change, and the service hands
 * out one object per held receipt (a read's receipt, a replay's shared answer), so the answer to such an
 * object is built once and kept with it (a WeakMap: it goes with the object); responses are immutable, each
 * request's headers go on its own copy. A new receipt's object is answered once, so it is encoded and not
 * kept; a proof bundle is built per request (the checkpoint moves), so its body is too.
 */
export const receiptAnswers = () => {
  const { stored, replayed } = createdAnswers()
  const encodeReceipt = jsonTextEncoder(RelianceReceipt)
  const encodeBundle = jsonTextEncoder(ReceiptProofBundle)
  const kept = new WeakMap<object, HttpServerResponse.HttpServerResponse>()
  const keptAnswer = <A extends object>(value: A, make: (value: A) => Effect.Effect<HttpServerResponse.HttpServerResponse>) => {
    const known = kept.get(value)
    return known !== undefined
      ? Effect.succeed(known)
      : Effect.tap(make(value), (response) => Effect.sync(() => kept.set(value, response)))
  }
  const created = (receipt: CreatedRelianceReceipt): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
    receipt.idempotent
      ? keptAnswer(receipt, (r) => Effect.map(bodyOf(replayed.encode, r), json(replayed.status)))
      : Effect.map(bodyOf(stored.encode, receipt), json(stored.status))
  /** The POST answer with the receipt's proof bundle, and the header saying the wait was applied (RFC 7240). */
  const createdWithProof = (receipt: CreatedRelianceReceipt, proof: ReceiptProofBundleValue, seconds: number): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    const answer = receipt.idempotent ? replayed : stored
    return Effect.map(bodyOf(answer.encode, { ...receipt, proof }), (body) =>
      HttpServerResponse.text(body, { status: answer.status, contentType: "application/json", headers: { "preference-applied": `wait=${seconds}` } }))
  }
  const read = (receipt: RelianceReceipt): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
    keptAnswer(receipt, (r) => Effect.map(bodyOf(encodeReceipt, r), json(200)))
  const proof = (bundle: ReceiptProofBundleValue): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
    Effect.map(bodyOf(encodeBundle, bundle), json(200))
  return { created, createdWithProof, read, proof } as const
}
