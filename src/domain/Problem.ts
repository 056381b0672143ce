import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

/**
 * Every failure the service reports is one of these tagged errors. The HTTP layer renders them as
 * RFC 9457 problem+json (see `src/http/Problems.ts`), the MCP layer as JSON-RPC error data: one
 * definition, two surfaces.
 */
export class FieldError extends Schema.Class<FieldError>("FieldError")({
  pointer: Schema.String,
  detail: Schema.String
}) {}

const fields = {
  detail: Schema.String,
  errors: Schema.optional(Schema.Array(FieldError))
}

export class InvalidPublicId extends Schema.TaggedError<InvalidPublicId>()("InvalidPublicId", fields,
  HttpApiSchema.annotations({ status: 400 })) {}
export class MalformedJson extends Schema.TaggedError<MalformedJson>()("MalformedJson", fields,
  HttpApiSchema.annotations({ status: 400 })) {}
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields,
  HttpApiSchema.annotations({ status: 401 })) {}
export class InsufficientScope extends Schema.TaggedError<InsufficientScope>()("InsufficientScope",
  { ...fields, scope: Schema.String }, HttpApiSchema.annotations({ status: 403 })) {}
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields,
  HttpApiSchema.annotations({ status: 403 })) {}
export class DeterminationNotFound extends Schema.TaggedError<DeterminationNotFound>()("DeterminationNotFound",
  fields, HttpApiSchema.annotations({ status: 404 })) {}
export class ReceiptNotFound extends Schema.TaggedError<ReceiptNotFound>()("ReceiptNotFound", fields,
  HttpApiSchema.annotations({ status: 404 })) {}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields,
  HttpApiSchema.annotations({ status: 404 })) {}
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", fields,
  HttpApiSchema.annotations({ status: 405 })) {}
export class NotAcceptable extends Schema.TaggedError<NotAcceptable>()("NotAcceptable", fields,
  HttpApiSchema.annotations({ status: 406 })) {}
export class UnsupportedProtocolVersion extends Schema.TaggedError<UnsupportedProtocolVersion>()("UnsupportedProtocolVersion",
  fields, HttpApiSchema.annotations({ status: 400 })) {}
export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>()("IdempotencyConflict", fields,
  HttpApiSchema.annotations({ status: 409 })) {}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields,
  HttpApiSchema.annotations({ status: 413 })) {}
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", fields,
  HttpApiSchema.annotations({ status: 415 })) {}
export class ValidationFailed extends Schema.TaggedError<ValidationFailed>()("ValidationFailed", fields,
  HttpApiSchema.annotations({ status: 422 })) {}
export class ProhibitedField extends Schema.TaggedError<ProhibitedField>()("ProhibitedField", fields,
  HttpApiSchema.annotations({ status: 422 })) {}
export class UnknownPurpose extends Schema.TaggedError<UnknownPurpose>()("UnknownPurpose", fields,
  HttpApiSchema.annotations({ status: 422 })) {}
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited",
  { ...fields, retry_after: Schema.Number }, HttpApiSchema.annotations({ status: 429 })) {}
export class QuotaExceeded extends Schema.TaggedError<QuotaExceeded>()("QuotaExceeded",
  { ...fields, retry_after: Schema.Number }, HttpApiSchema.annotations({ status: 429 })) {}
export class Internal extends Schema.TaggedError<Internal>()("Internal", fields,
  HttpApiSchema.annotations({ status: 500 })) {}
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields,
  HttpApiSchema.annotations({ status: 400 })) {}
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", fields,
  HttpApiSchema.annotations({ status: 408 })) {}
export class ExpectationFailed extends Schema.TaggedError<ExpectationFailed>()("ExpectationFailed", fields,
  HttpApiSchema.annotations({ status: 417 })) {}
export class HeaderFieldsTooLarge extends Schema.TaggedError<HeaderFieldsTooLarge>()("HeaderFieldsTooLarge", fields,
  HttpApiSchema.annotations({ status: 431 })) {}
export class Overloaded extends Schema.TaggedError<Overloaded>()("Overloaded", fields,
  HttpApiSchema.annotations({ status: 503 })) {}
export class OriginNotAllowed extends Schema.TaggedError<OriginNotAllowed>()("OriginNotAllowed", fields,
  HttpApiSchema.annotations({ status: 403 })) {}
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", fields,
  HttpApiSchema.annotations({ status: 503 })) {}
/** The receipt exists but the log has not integrated its entry yet (contract section 10). */
export class NotYetLogged extends Schema.TaggedError<NotYetLogged>()("NotYetLogged",
  { ...fields, retry_after: Schema.Number }, HttpApiSchema.annotations({ status: 404 })) {}
/** Contract section 10 answers a proof request outside the published tree with 400 (not 422), code validation-failed. */
export class InvalidProofRequest extends Schema.TaggedError<InvalidProofRequest>()("InvalidProofRequest", fields,
  HttpApiSchema.annotations({ status: 400 })) {}

export type ProblemError =
  | InvalidPublicId | MalformedJson | Unauthorized | InsufficientScope | Forbidden | DeterminationNotFound
  | ReceiptNotFound | NotFound | MethodNotAllowed | IdempotencyConflict | PayloadTooLarge | UnsupportedMediaType
  | ValidationFailed | ProhibitedField | UnknownPurpose | RateLimited | QuotaExceeded | Internal | Unavailable
  | NotAcceptable | UnsupportedProtocolVersion | Overloaded | OriginNotAllowed
  | BadRequest | RequestTimeout | ExpectationFailed | HeaderFieldsTooLarge
  | NotYetLogged | InvalidProofRequest

/** Contract section 1: tag → (code, status, title). */
export const problemCatalog: Record<ProblemError["_tag"], { readonly code: string; readonly status: number; readonly title: string }> = {
  InvalidPublicId: { code: "invalid-public-id", status: 400, title: "Invalid public identifier" },
  MalformedJson: { code: "malformed-json", status: 400, title: "Malformed JSON" },
  Unauthorized: { code: "unauthorized", status: 401, title: "Unauthorized" },
  InsufficientScope: { code: "insufficient-scope", status: 403, title: "Insufficient scope" },
  Forbidden: { code: "forbidden", status: 403, title: "Forbidden" },
  DeterminationNotFound: { code: "determination-not-found", status: 404, title: "Determination not found" },
  ReceiptNotFound: { code: "receipt-not-found", status: 404, title: "Receipt not found" },
  NotFound: { code: "not-found", status: 404, title: "Not found" },
  MethodNotAllowed: { code: "method-not-allowed", status: 405, title: "Method not allowed" },
  NotAcceptable: { code: "not-acceptable", status: 406, title: "Not acceptable" },
  UnsupportedProtocolVersion: { code: "unsupported-protocol-version", status: 400, title: "Unsupported protocol version" },
  IdempotencyConflict: { code: "idempotency-conflict", status: 409, title: "Idempotency conflict" },
  PayloadTooLarge: { code: "payload-too-large", status: 413, title: "Payload too large" },
  UnsupportedMediaType: { code: "unsupported-media-type", status: 415, title: "Unsupported media type" },
  ValidationFailed: { code: "validation-failed", status: 422, title: "Validation failed" },
  ProhibitedField: { code: "prohibited-field", status: 422, title: "Prohibited field" },
  UnknownPurpose: { code: "unknown-purpose", status: 422, title: "Unknown purpose or action" },
  RateLimited: { code: "rate-limited", status: 429, title: "Rate limit exceeded" },
  QuotaExceeded: { code: "quota-exceeded", status: 429, title: "Daily quota exceeded" },
  Internal: { code: "internal", status: 500, title: "Internal error" },
  Unavailable: { code: "unavailable", status: 503, title: "Service unavailable" },
  Overloaded: { code: "overloaded", status: 503, title: "Overloaded" },
  OriginNotAllowed: { code: "origin-not-allowed", status: 403, title: "Origin not allowed" },
  // Refusals by the HTTP parser, before any route is known (http/FrontDoor.ts).
  BadRequest: { code: "bad-request", status: 400, title: "Bad request" },
  RequestTimeout: { code: "request-timeout", status: 408, title: "Request timeout" },
  ExpectationFailed: { code: "expectation-failed", status: 417, title: "Expectation failed" },
  HeaderFieldsTooLarge: { code: "header-fields-too-large", status: 431, title: "Request header fields too large" },
  // The transparency log (contract section 10).
  NotYetLogged: { code: "not-yet-logged", status: 404, title: "Not yet logged" },
  InvalidProofRequest: { code: "validation-failed", status: 400, title: "Validation failed" }
}

const problemTags = new Set(Object.keys(problemCatalog))
export const isProblemError = (u: unknown): u is ProblemError =>
  typeof u === "object" && u !== null && "_tag" in u && problemTags.has((u as { _tag: string })._tag)

/** The RFC 9457 body: the same object over REST and as MCP `error.data`. */
export class ProblemDocument extends Schema.Class<ProblemDocument>("ProblemDocument")({
  type: Schema.String,
  title: Schema.String,
  status: Schema.Int,
  detail: Schema.String,
  code: Schema.String,
  instance: Schema.optional(Schema.String),
  errors: Schema.optional(Schema.Array(FieldError))
}, { description: "RFC 9457 problem details" }) {}

export const toProblemDocument = (error: ProblemError, instance?: string): ProblemDocument => {
  const entry = problemCatalog[error._tag]
  return {
    type: `urn:pv:problem:${entry.code}`,
    title: entry.title,
    status: entry.status,
    detail: error.detail,
    code: entry.code,
    ...(instance !== undefined ? { instance } : {}),
    ...(error.errors !== undefined && error.errors.length > 0 ? { errors: error.errors } : {})
  } as ProblemDocument
}
