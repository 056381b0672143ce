import type { Cause } from "effect"
import { Effect, ErrorReporter, Schema, SchemaIssue } from "effect"
import { HttpServerRespondable, HttpServerResponse } from "effect/http"
import { problemJsonEncoding } from "./EffectInternals.js"
import { toPointer } from "./Json.js"

/**
 * Every failure the service reports is one of these errors. Each class declares its code, status and
 * title once; its instances ARE the RFC 9457 document (`type, title, status, detail, code, instance?,
 * errors?`), so HttpApi renders a class declared as an endpoint error as application/problem+json with
 * that status, and the MCP layer sends the same document as JSON-RPC error data: one definition, two
 * surfaces. Headers (Retry-After, WWW-Authenticate) and `instance` are the HTTP edge's (src/api/Problems.ts).
 */
export class FieldError extends Schema.Class<FieldError>("FieldError")({
  pointer: Schema.String,
  detail: Schema.String
}) {}

/** The RFC 9457 body: the same object over REST and as MCP `error.data`; every problem class encodes to it. */
export const ProblemDocument = Schema.Struct({
  type: Schema.String,
  title: Schema.String,
  status: Schema.Int,
  detail: Schema.String,
  code: Schema.String,
  instance: Schema.optionalKey(Schema.String),
  errors: Schema.optionalKey(Schema.Array(FieldError))
}).annotate({ identifier: "ProblemDocument", description: "RFC 9457 problem details" })
export type ProblemDocument = typeof ProblemDocument.Type

/** What a problem is constructed from; code, status, title and type come from its class. */
export interface ProblemInput {
  readonly detail: string
  readonly errors?: ReadonlyArray<FieldError> | undefined
  readonly instance?: string | undefined
}

/** Marks our problems, so HttpApi's own errors of the same `_tag` (NotFound, BadRequest, …) are never taken for them. */
const ProblemTypeId: unique symbol = Symbol.for("pv/Problem")

interface ProblemMembers<Tag extends string, Code extends string, Status extends number> extends ProblemDocument {
  readonly _tag: Tag
  readonly code: Code
  readonly status: Status
  readonly [ProblemTypeId]: typeof ProblemTypeId
}

/** A problem class: a `Schema.Error` over ProblemDocument, constructed from `{ detail, errors?, instance? }`. */
export type ProblemClass<Self, Tag extends string, Code extends string, Status extends number> =
  & (new(input: ProblemInput, options?: Schema.MakeOptions) => ProblemMembers<Tag, Code, Status> & Cause.YieldableError)
  & Omit<Schema.Class<Self, typeof ProblemDocument, Cause.YieldableError>, never>
  & { readonly tag: Tag; readonly code: Code; readonly status: Status; readonly title: string }

/** Declares a problem class: `class X extends problem<X>()("X", { code, status, title }) {}`. */
const problem = <Self>() =>
<const Tag extends string, const Code extends string, const Status extends number>(
  tag: Tag,
  spec: { readonly code: Code; readonly status: Status; readonly title: string }
): ProblemClass<Self, Tag, Code, Status> => {
  const type = `urn:pv:problem:${spec.code}`
  const Base = Schema.Error<Self>(tag)(ProblemDocument, {
    description: spec.title,
    httpApiStatus: spec.status,
    ...problemJsonEncoding
  }) as unknown as new(input: unknown, options?: Schema.MakeOptions) => object
  const ignored = spec.status < 500
  // Every member below is the class's own, on its prototype (none per instance): its tag, the brand that tells
  // our problems from HttpApi's errors of the same tag, whether the error reporter leaves it out (client errors
  // are not the service's faults), its HTTP answer when it reaches the server undeclared (no instance: the
  // request is not known there), and its message (the detail).
  class Problem extends Base {
    static readonly tag = tag
    static readonly code = spec.code
    static readonly status = spec.status
    static readonly title = spec.title
      // Decoding passes the document itself (a ProblemInput too) and options that carry it.
    constructor(input: ProblemInput, options?: Schema.MakeOptions) {
      super({
        type,
        title: spec.title,
        status: spec.status,
        detail: input.detail,
        code: spec.code,
        ...(input.instance !== undefined ? { instance: input.instance } : {}),
        ...(input.errors !== undefined && input.errors.length > 0 ? { errors: input.errors } : {})
      }, options)
    }
    get _tag() {
      return tag
    }
    get [ProblemTypeId]() {
      return ProblemTypeId
    }
    get [ErrorReporter.ignore]() {
      return ignored
    }
    [HttpServerRespondable.symbol](this: ProblemError) {
      const { status, headers, body } = renderProblem(this)
      return Effect.succeed(HttpServerResponse.text(body, { status, contentType: ProblemContentType, headers }))
    }
    get message() {
      return (this as unknown as ProblemInput).detail
    }
  }
  return Problem as unknown as ProblemClass<Self, Tag, Code, Status>
}

/** For problems that carry a retry hint: seconds, sent as Retry-After (never in the body). */
export interface RetryInput extends ProblemInput {
  readonly retry_after: number
}

/** A document decoded from the wire has no retry_after (it travels in Retry-After): retry in a second. */
const retryAfterOf = (input: RetryInput) => (input as { readonly retry_after?: number }).retry_after ?? 1

export class InvalidPublicId extends problem<InvalidPublicId>()("InvalidPublicId",
  { code: "invalid-public-id", status: 400, title: "Invalid public identifier" }) {}
export class MalformedJson extends problem<MalformedJson>()("MalformedJson",
  { code: "malformed-json", status: 400, title: "Malformed JSON" }) {}
export class Unauthorized extends problem<Unauthorized>()("Unauthorized",
  { code: "unauthorized", status: 401, title: "Unauthorized" }) {}
/** `scope` (the one the request lacked) goes into WWW-Authenticate, not into the body. */
export class InsufficientScope extends problem<InsufficientScope>()("InsufficientScope",
  { code: "insufficient-scope", status: 403, title: "Insufficient scope" }) {
  readonly scope: string
  constructor(input: ProblemInput & { readonly scope: string }, options?: Schema.MakeOptions) {
    super(input, options)
    // A document decoded from the wire has no scope (it travels in WWW-Authenticate).
    this.scope = (input as { readonly scope?: string }).scope ?? ""
  }
}
export class Forbidden extends problem<Forbidden>()("Forbidden",
  { code: "forbidden", status: 403, title: "Forbidden" }) {}
export class DeterminationNotFound extends problem<DeterminationNotFound>()("DeterminationNotFound",
  { code: "determination-not-found", status: 404, title: "Determination not found" }) {}
export class ReceiptNotFound extends problem<ReceiptNotFound>()("ReceiptNotFound",
  { code: "receipt-not-found", status: 404, title: "Receipt not found" }) {}
export class NotFound extends problem<NotFound>()("NotFound",
  { code: "not-found", status: 404, title: "Not found" }) {}
export class MethodNotAllowed extends problem<MethodNotAllowed>()("MethodNotAllowed",
  { code: "method-not-allowed", status: 405, title: "Method not allowed" }) {}
export class NotAcceptable extends problem<NotAcceptable>()("NotAcceptable",
  { code: "not-acceptable", status: 406, title: "Not acceptable" }) {}
export class UnsupportedProtocolVersion extends problem<UnsupportedProtocolVersion>()("UnsupportedProtocolVersion",
  { code: "unsupported-protocol-version", status: 400, title: "Unsupported protocol version" }) {}
export class IdempotencyConflict extends problem<IdempotencyConflict>()("IdempotencyConflict",
  { code: "idempotency-conflict", status: 409, title: "Idempotency conflict" }) {}
export class PayloadTooLarge extends problem<PayloadTooLarge>()("PayloadTooLarge",
  { code: "payload-too-large", status: 413, title: "Payload too large" }) {}
export class UnsupportedMediaType extends problem<UnsupportedMediaType>()("UnsupportedMediaType",
  { code: "unsupported-media-type", status: 415, title: "Unsupported media type" }) {}
export class ValidationFailed extends problem<ValidationFailed>()("ValidationFailed",
  { code: "validation-failed", status: 422, title: "Validation failed" }) {}
export class ProhibitedField extends problem<ProhibitedField>()("ProhibitedField",
  { code: "prohibited-field", status: 422, title: "Prohibited field" }) {}
/** A webhook URL the service will not send to (scheme, user information, length, or an internal address). */
export class InvalidWebhookUrl extends problem<InvalidWebhookUrl>()("InvalidWebhookUrl",
  { code: "invalid-webhook-url", status: 422, title: "Invalid webhook URL" }) {}
export class UnknownPurpose extends problem<UnknownPurpose>()("UnknownPurpose",
  { code: "unknown-purpose", status: 422, title: "Unknown purpose or action" }) {}
export class RateLimited extends problem<RateLimited>()("RateLimited",
  { code: "rate-limited", status: 429, title: "Rate limit exceeded" }) {
  readonly retry_after: number
  constructor(input: RetryInput, options?: Schema.MakeOptions) {
    super(input, options)
    this.retry_after = retryAfterOf(input)
  }
}
export class QuotaExceeded extends problem<QuotaExceeded>()("QuotaExceeded",
  { code: "quota-exceeded", status: 429, title: "Daily quota exceeded" }) {
  readonly retry_after: number
  constructor(input: RetryInput, options?: Schema.MakeOptions) {
    super(input, options)
    this.retry_after = retryAfterOf(input)
  }
}
export class Internal extends problem<Internal>()("Internal",
  { code: "internal", status: 500, title: "Internal error" }) {}
export class Unavailable extends problem<Unavailable>()("Unavailable",
  { code: "unavailable", status: 503, title: "Service unavailable" }) {}
export class Overloaded extends problem<Overloaded>()("Overloaded",
  { code: "overloaded", status: 503, title: "Overloaded" }) {}
export class OriginNotAllowed extends problem<OriginNotAllowed>()("OriginNotAllowed",
  { code: "origin-not-allowed", status: 403, title: "Origin not allowed" }) {}
// Refusals by the HTTP parser, before any route is known (http/FrontDoor.ts).
export class BadRequest extends problem<BadRequest>()("BadRequest",
  { code: "bad-request", status: 400, title: "Bad request" }) {}
export class RequestTimeout extends problem<RequestTimeout>()("RequestTimeout",
  { code: "request-timeout", status: 408, title: "Request timeout" }) {}
export class ExpectationFailed extends problem<ExpectationFailed>()("ExpectationFailed",
  { code: "expectation-failed", status: 417, title: "Expectation failed" }) {}
export class HeaderFieldsTooLarge extends problem<HeaderFieldsTooLarge>()("HeaderFieldsTooLarge",
  { code: "header-fields-too-large", status: 431, title: "Request header fields too large" }) {}
/** The receipt exists but the log has not integrated its entry yet (docs/API.md §11.7). */
export class NotYetLogged extends problem<NotYetLogged>()("NotYetLogged",
  { code: "not-yet-logged", status: 404, title: "Not yet logged" }) {
  readonly retry_after: number
  constructor(input: RetryInput, options?: Schema.MakeOptions) {
    super(input, options)
    this.retry_after = retryAfterOf(input)
  }
}
/** docs/API.md §11.6 answers a proof request outside the published tree with 400 (not 422), code validation-failed. */
export class InvalidProofRequest extends problem<InvalidProofRequest>()("InvalidProofRequest",
  { code: "validation-failed", status: 400, title: "Validation failed" }) {}

/** Every problem class (docs/API.md §5.2). */
export const problemClasses = [
  InvalidPublicId, MalformedJson, Unauthorized, InsufficientScope, Forbidden, DeterminationNotFound,
  ReceiptNotFound, NotFound, MethodNotAllowed, NotAcceptable, UnsupportedProtocolVersion, IdempotencyConflict,
  PayloadTooLarge, UnsupportedMediaType, ValidationFailed, ProhibitedField, UnknownPurpose, RateLimited,
  QuotaExceeded, Internal, Unavailable, Overloaded, OriginNotAllowed, BadRequest, RequestTimeout,
  ExpectationFailed, HeaderFieldsTooLarge, NotYetLogged, InvalidProofRequest, InvalidWebhookUrl
] as const

export type ProblemError = InstanceType<typeof problemClasses[number]>

/** docs/API.md §5.2: tag → (code, status, title), read off the classes. */
export const problemCatalog = Object.fromEntries(
  problemClasses.map((c) => [c.tag, { code: c.code, status: c.status, title: c.title }])
) as Record<ProblemError["_tag"], { readonly code: string; readonly status: number; readonly title: string }>

export const isProblemError = (u: unknown): u is ProblemError =>
  typeof u === "object" && u !== null && ProblemTypeId in u

/** The document of `error`, with `instance` when given (else the error's own, if it has one). */
export const toProblemDocument = (error: ProblemError, instance?: string): ProblemDocument => {
  const at = instance ?? error.instance
  return {
    type: error.type,
    title: error.title,
    status: error.status,
    detail: error.detail,
    code: error.code,
    ...(at !== undefined ? { instance: at } : {}),
    ...(error.errors !== undefined && error.errors.length > 0 ? { errors: error.errors } : {})
  }
}

const realm = `Bearer realm="pv"`

/**
 * The headers that go with a problem (docs/API.md §5.1): how to authenticate, and when to retry.
 * HttpApi encodes the body of a declared problem; these are added to that response (src/http/RequestGuard.ts).
 */
export const problemHeaders = (error: ProblemError): Record<string, string> => {
  switch (error._tag) {
    case "Unauthorized":
      return { "www-authenticate": `${realm}, error="invalid_token"` }
    case "InsufficientScope":
      return { "www-authenticate": `${realm}, error="insufficient_scope", scope="${error.scope}"` }
    case "RateLimited":
    case "QuotaExceeded":
    case "NotYetLogged":
      return { "retry-after": String(Math.max(1, Math.ceil(error.retry_after))) }
    // A dependency that is down or a process at capacity: worth retrying soon (docs/API.md §13).
    case "Unavailable":
    case "Overloaded":
      return { "retry-after": "1" }
    default:
      return {}
  }
}

export const ProblemContentType = "application/problem+json"

/** A problem as the service answers it: status, headers (content type, how to authenticate, when to retry) and body. */
export interface RenderedProblem {
  readonly status: number
  /** `content-type`, then `problemHeaders`; without `content-length`, which depends on how it is written. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/**
 * Every problem the service answers is rendered here, whoever writes it (HttpApi's declared errors, raw
 * handlers, the edge middleware, the front door's refusals, a socket the parser gave up on).
 */
export const renderProblem = (error: ProblemError, instance?: string): RenderedProblem => {
  const document = toProblemDocument(error, instance)
  return { status: document.status, headers: { "content-type": ProblemContentType, ...problemHeaders(error) }, body: JSON.stringify(document) }
}

/** A copy of `error` whose document names `instance` (extras such as `retry_after` kept). */
export const withInstance = <E extends ProblemError>(error: E, instance: string): E =>
  Object.assign(Object.create(Object.getPrototypeOf(error)) as E, error, { instance })

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

/** A decode failure → one FieldError (JSON pointer, message) per failing member: the one translation every edge uses. */
export const fieldErrorsOf = (issue: SchemaIssue.Issue): Array<FieldError> =>
  formatIssues(issue).issues.map(({ path = [], message }) =>
    new FieldError({
      pointer: toPointer(path.map((segment) => (typeof segment === "object" && segment !== null ? segment.key : segment))),
      detail: message
    }))
