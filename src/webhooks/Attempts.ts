import { Schema } from "effect"
import type { AttemptOutcome } from "./Send.js"

/** How one attempt ended, as GET …/attempts shows it. */
export const AttemptOutcomeKind = Schema.Literals(["delivered", "failed", "timeout", "refused"])
export type AttemptOutcomeKind = typeof AttemptOutcomeKind.Type

/** What is stored of an attempt's outcome: its kind, the receiver's HTTP status if one came, the error if any. */
export interface AttemptResult {
  readonly outcome: AttemptOutcomeKind
  readonly status: number | null
  readonly error: string | null
}

/** The newest attempts kept per subscription; older ones are pruned in the background. */
export const AttemptsKept = 100

/** The longest error text stored with an attempt. */
export const MaxAttemptErrorChars = 500

/** With the u flag a paired surrogate is one code point, so this matches lone ones only. */
const LoneSurrogate = /[\uD800-\uDFFF]/gu

/** Text any database stores: no NUL, no lone surrogate (each becomes U+FFFD), at most `MaxAttemptErrorChars` characters. */
export const storableError = (text: string): string => {
  const clean = (text.length <= MaxAttemptErrorChars ? text : `${text.slice(0, MaxAttemptErrorChars - 1)}…`)
    .replaceAll("\u0000", "\uFFFD")
  return clean.replace(LoneSurrogate, "\uFFFD")
}

/**
 * The record of an attempt (webhooks/Send.ts says what happened):
 * - `delivered`: a 2xx;
 * - `timeout`: the attempt's time-out came before the receiver's status;
 * - `refused`: this service's own rules stopped it: the address connected to is one the rules refuse, the URL
 *   cannot be sent to, or the answer was a redirect (3xx, never followed; its status is kept);
 * - `failed`: any other non-2xx status, or the connection failed (refused by the peer, reset, DNS, TLS).
 * The error is Send's text (never a header, so never a secret or a signature), made storable.
 */
export const attemptResultOf = (outcome: AttemptOutcome): AttemptResult => {
  if (outcome.kind === "delivered") return { outcome: "delivered", status: outcome.status, error: null }
  const status = outcome.status ?? null
  const error = storableError(outcome.error)
  if (status !== null) return { outcome: status >= 300 && status < 400 ? "refused" : "failed", status, error }
  if (outcome.timedOut === true) return { outcome: "timeout", status, error }
  return { outcome: outcome.scope === "url" ? "refused" : "failed", status, error }
}

/** An attempt as GET /api/v1/subscriptions/{id}/attempts answers it. */
export const WebhookAttempt = Schema.Struct({
  attempt_id: Schema.String.annotate({ description: "att_ + ULID, stamped when the attempt started: the page cursor" }),
  event_id: Schema.String.annotate({ description: "The event sent (its webhook-id)" }),
  sequence: Schema.Int,
  started_at: Schema.String.annotate({ description: "RFC 3339 UTC" }),
  duration_ms: Schema.Int.annotate({ description: "From the start of the attempt to its outcome" }),
  status: Schema.NullOr(Schema.Int).annotate({ description: "The receiver's HTTP status; null when none came" }),
  outcome: AttemptOutcomeKind.annotate({
    description: "delivered: 2xx; failed: another status, or the connection failed; timeout: no status within the time-out; " +
      "refused: the address rules refused the connection, the URL cannot be sent to, or a redirect (3xx, never followed)"
  }),
  error: Schema.NullOr(Schema.String).annotate({ description: "What failed (HTTP 503, timed out after 10 s, …); null when delivered" })
}).annotate({ identifier: "WebhookAttempt" })
export type WebhookAttempt = typeof WebhookAttempt.Type

export const WebhookAttemptPage = Schema.Struct({
  attempts: Schema.Array(WebhookAttempt).annotate({ description: "Newest first" }),
  next_after: Schema.NullOr(Schema.String).annotate({ description: "Pass as `after` for older attempts; null on the last page" })
}).annotate({ identifier: "WebhookAttemptPage" })
export type WebhookAttemptPage = typeof WebhookAttemptPage.Type

/** Attempt ids are `att_` + ULID; a cursor that is not one never reaches SQL. */
export const AttemptIdPattern = /^att_[0-9A-HJKMNP-TV-Z]{26}$/u
