/**
 * What the package exports to consumers (`pv-trust-service/client`):
 * - a typed client for the REST surface, derived from the service's HttpApi definition (`./http.ts`):
 *   `makeTrustClient` (async functions) and `makeTrustHttpClient` (Effect);
 * - what a client needs to check the service's answers without trusting it: the same digest recipes the
 *   server uses (RFC 8785 JCS, SHA-256, lowercase hex), the event-chain verifier and the receipt-bundle and
 *   checkpoint-consistency verifiers of the transparency log (`./log.ts`);
 * - a webhook receiver's check of a delivery's Standard Webhooks signature (`./webhook.ts`).
 */
import { digestOf } from "../domain/Canonical.js"
import { receiptDigestOf, type ReceiptSnapshot, type RelianceReceipt } from "../domain/Receipt.js"

export { trustStateDigestOf } from "../domain/MachineTrust.js"
export type { MachineTrustResponse } from "../domain/MachineTrust.js"
// POST /reliance-receipts' answer: the receipt, with `proof` when the request sent Prefer: wait.
export type { CreatedRelianceReceiptAnswer as CreatedRelianceReceipt } from "../receipts/Api.js"
export type {
  ActionabilityEvaluation,
  Decision,
  ReceiptSnapshot,
  RelianceReceipt,
  RelianceRequest,
  Verdict
} from "../domain/Receipt.js"
export { receiptDigestOf }

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** True when `receipt_digest` is the SHA-256 of the JCS form of `snapshot_payload`. */
export const verifyReceiptDigest = (receipt: Pick<RelianceReceipt, "snapshot_payload" | "receipt_digest">): boolean =>
  typeof receipt.receipt_digest === "string" && isObject(receipt.snapshot_payload) &&
  receiptDigestOf(receipt.snapshot_payload as ReceiptSnapshot) === receipt.receipt_digest

/**
 * The digest verifies and every top-level field agrees with the snapshot it covers, so a receipt whose
 * `decision` was edited outside `snapshot_payload` is caught too.
 */
export const verifyReceipt = (receipt: RelianceReceipt): boolean =>
  verifyReceiptDigest(receipt) &&
  Object.entries(receipt.snapshot_payload).every(([field, value]) =>
    Object.hasOwn(receipt, field) && digestOf((receipt as Record<string, unknown>)[field]) === digestOf(value))

// Event feed: the hash recipe and the chain verifier (links, hashes, signatures against the JWKS).
export { eventHashOf } from "../domain/EventChain.js"
export { keysFromJwks, verifyEventChain } from "../domain/EventVerify.js"
export type { ChainFailureReason, ChainVerdict, VerifyOptions } from "../domain/EventVerify.js"
export type { EventJwks, EventPage, TrustEvent } from "../domain/TrustEvent.js"
export * from "./log.js"
export * from "./webhook.js"

// The typed REST client (and `PolicyView`, the type it decodes GET /policy to) and the problem classes its failures are.
export * from "./http.js"
export {
  BadRequest,
  DeterminationNotFound,
  ExpectationFailed,
  FieldError,
  Forbidden,
  HeaderFieldsTooLarge,
  IdempotencyConflict,
  InsufficientScope,
  Internal,
  InvalidProofRequest,
  InvalidWebhookUrl,
  InvalidPublicId,
  MalformedJson,
  MethodNotAllowed,
  NotAcceptable,
  NotFound,
  NotYetLogged,
  Overloaded,
  OriginNotAllowed,
  PayloadTooLarge,
  ProhibitedField,
  problemCatalog,
  problemClasses,
  isProblemError,
  QuotaExceeded,
  RateLimited,
  ReceiptNotFound,
  RequestTimeout,
  Unauthorized,
  UnknownPurpose,
  Unavailable,
  UnsupportedMediaType,
  UnsupportedProtocolVersion,
  ValidationFailed
} from "../domain/Problem.js"
export type { ProblemDocument, ProblemError } from "../domain/Problem.js"
