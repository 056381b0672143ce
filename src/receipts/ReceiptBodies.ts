import { Effect } from "effect"
import { jsonTextEncoder } from "../domain/Json.js"
import { CreatedRelianceReceipt, RelianceReceipt } from "../domain/Receipt.js"
import { ReceiptProofBundle as ReceiptProofBundleSchema } from "../log/Api.js"

// The receipts' wire JSON: each body written by its endpoint's success schema, and kept per receipt object.

/**
 * The success schemas of GET (RelianceReceipt), POST (CreatedRelianceReceipt) and GET …/proof
 * (ReceiptProofBundle) write their bodies. A stored receipt was written from these fields in this order, so
 * the bytes are the stored JSON's, and a stored member the schema does not know is never dropped
 * (receipt_digest covers snapshot_payload).
 */
export const encodeReceipt = jsonTextEncoder(RelianceReceipt)
export const encodeCreated = jsonTextEncoder(CreatedRelianceReceipt)
export const encodeBundle = jsonTextEncoder(ReceiptProofBundleSchema)

/**
 * The body through its schema. A stored receipt that does not fit was edited in the database after it was
 * written: it is sent as stored, with a warning, so the relying party's verification shows the edit (its
 * digest step fails) instead of a 500 hiding it (test/http/log.http.test.ts, "stored JSON was edited").
 */
export const bodyOf = <A extends object>(encode: (value: A) => string, value: A): Effect.Effect<string> =>
  Effect.try({ try: () => encode(value), catch: (error) => error }).pipe(
    Effect.catch((error) =>
      Effect.as(Effect.logWarning("a stored receipt does not fit its schema: sent as stored", error), JSON.stringify(value)))
  )

/**
 * Each receipt object's body, built on first use (one map per schema, so an object is only ever one kind).
 * `know` records a body the caller already holds for an object (see `create`), so it is never built again.
 */
export const memoBody = <A extends object>(encode: (value: A) => string) => {
  const serialised = new WeakMap<A, string>()
  const of = (value: A): Effect.Effect<string> => {
    const known = serialised.get(value)
    return known !== undefined
      ? Effect.succeed(known)
      : Effect.tap(bodyOf(encode, value), (text) => Effect.sync(() => serialised.set(value, text)))
  }
  const know = (value: A, text: string): void => void serialised.set(value, text)
  return { of, know } as const
}

/**
 * The POST body of a receipt whose stored JSON is `stored`: the stored members, then `idempotent`. This is
 * what CreatedRelianceReceipt's encoder writes for it (its fields are RelianceReceipt's, in the same order,
 * plus `idempotent`), without encoding the receipt again.
 */
export const createdBodyOf = (stored: string, idempotent: boolean): string =>
  `${stored.slice(0, -1)},"idempotent":${idempotent ? "true" : "false"}}`
