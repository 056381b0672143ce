import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { ApiKeyAuth, RequiredScope } from "../api/Auth.js"
import {
  DeterminationNotFound,
  InvalidPublicId,
  InvalidWebhookUrl,
  NotFound,
  ValidationFailed
} from "../domain/Problem.js"
import { AttemptIdPattern, WebhookAttemptPage } from "./Attempts.js"
import { MaxSequence, QueryInt } from "../events/Api.js"
import { DefaultPageSize, MaxPageSize } from "../events/Paging.js"
import { SignatureScheme } from "../domain/SignatureScheme.js"

const Timestamp = Schema.String.annotate({ description: "RFC 3339 UTC" })

/**
 * A subscription as every surface answers it (REST, and MCP `subscribe_trust_changes`). The secret appears
 * only in the answer that made it (POST 201, rotate-secret); the status members tell how delivery goes.
 */
export const Subscription = Schema.Struct({
  subscription_id: Schema.String.annotate({ description: "sub_ + ULID" }),
  public_id: Schema.String,
  delivery: Schema.Literals(["pull", "webhook"]).annotate({
    description: "pull: read events_url; webhook: each event is POSTed to webhook_url, signed (Standard Webhooks)"
  }),
  after: Schema.Int.annotate({ description: "The chain head when the subscription was made: changes are the events after it" }),
  events_url: Schema.String.annotate({ description: "Where the events stay readable (GET, scope trust:read), whatever the delivery" }),
  webhook_url: Schema.optionalKey(Schema.String.annotate({ description: "Webhook subscriptions: where each event is POSTed" })),
  signature_scheme: Schema.optionalKey(SignatureScheme.annotate({
    description: "Webhook subscriptions: v1 (HMAC-SHA256 with webhook_secret) or v1a (Ed25519 with the service's key, " +
      "GET /api/v1/webhooks/signing-key; no secret)"
  })),
  webhook_secret: Schema.optionalKey(Schema.String.annotate({
    description: "v1 webhook subscriptions: whsec_ + base64 of 32 random bytes, the HMAC key of webhook-signature. Only in the answer " +
      "that created it; store it now"
  })),
  status: Schema.Literals(["active", "disabled"]).annotate({
    description: "disabled: nothing more is sent (disabled_reason says why); POST …/resume restarts delivery"
  }),
  disabled_reason: Schema.NullOr(Schema.Literals(["gone", "failing"])).annotate({
    description: "Why it is disabled: gone (the receiver answered 410 Gone), failing (attempts failed for " +
      "PV_WEBHOOK_MAX_FAILURE_SECONDS); null while active"
  }),
  created_at: Timestamp,
  delivered_through: Schema.NullOr(Schema.Int).annotate({ description: "Webhook: the last acknowledged sequence; pull: null" }),
  pending: Schema.NullOr(Schema.Int).annotate({ description: "Webhook: events not yet acknowledged; pull: null" }),
  attempts: Schema.Int.annotate({ description: "Failed attempts of the event now being delivered" }),
  last_attempt_at: Schema.NullOr(Timestamp).annotate({ description: "When the last attempt ended (RFC 3339 UTC); null before the first" }),
  last_error: Schema.NullOr(Schema.String).annotate({ description: "The last failed attempt's status or error; null after a success" }),
  next_attempt_at: Schema.NullOr(Timestamp).annotate({ description: "When the next attempt is due; null when nothing is owed" })
}).annotate({ identifier: "Subscription" })
export type Subscription = typeof Subscription.Type

export const SubscriptionPage = Schema.Struct({
  subscriptions: Schema.Array(Subscription),
  next_after: Schema.NullOr(Schema.String).annotate({ description: "Pass as `after` for the next page; null on the last" })
}).annotate({ identifier: "SubscriptionPage" })
export type SubscriptionPage = typeof SubscriptionPage.Type

export const MaxSubscriptionPage = 100

export const SubscribeRequest = Schema.Struct({
  public_id: Schema.String.annotate({ description: "DET-V1-* or QUAL-V1-*" }),
  webhook_url: Schema.optionalKey(Schema.String.annotate({
    description: "https:// URL (at most 2,048 characters, no user information, a public address) to POST each event to; " +
      "absent: a pull subscription"
  })),
  signature_scheme: Schema.optionalKey(SignatureScheme.annotate({
    description: "How deliveries are signed (Standard Webhooks): v1 (default, HMAC-SHA256 with the webhook_secret issued now) or " +
      "v1a (Ed25519 with the service's key, GET /api/v1/webhooks/signing-key; no secret). Only with webhook_url"
  }))
}).annotate({
  identifier: "SubscribeRequest",
  examples: [{ public_id: "DET-V1-ACME-0001", webhook_url: "https://hooks.example.com/pv-trust" }]
})

const SubscriptionPath = { subscriptionId: Schema.String.annotate({ description: "sub_ + ULID" }) }

export const RedeliverRequest = Schema.Struct({
  // One check, one message; the chain head is checked by the service, this bound keeps the number within an integer column.
  from_sequence: Schema.Number.check(Schema.makeFilter((n: number) =>
    (Number.isSafeInteger(n) && n >= 1 && n <= MaxSequence) || "must be an integer from 1 to the chain head")).annotate({
    description: "The first sequence to deliver again: 1 to the chain head"
  })
}).annotate({ identifier: "RedeliverRequest", examples: [{ from_sequence: 3 }] })

export class SubscriptionsApi extends HttpApiGroup.make("subscriptions")
  .add(
    HttpApiEndpoint.post("create", "/subscriptions", {
      payload: SubscribeRequest,
      success: [Subscription.pipe(HttpApiSchema.status(201)), Subscription.pipe(HttpApiSchema.status(200))],
      error: [InvalidPublicId, DeterminationNotFound, InvalidWebhookUrl, ValidationFailed]
    })
      .annotate(OpenApi.Summary, "Subscribe to a determination's trust changes")
      .annotate(OpenApi.Description,
        "Without webhook_url: a pull subscription (read events_url). With it: every event after `after` is POSTed to the URL, " +
        "in sequence order, one at a time, signed with the Standard Webhooks headers (webhook-id = event_id, webhook-timestamp, " +
        "webhook-signature = v1,base64(HMAC-SHA256(secret, id.timestamp.body)), or with signature_scheme v1a " +
        "v1a,base64(Ed25519(service key, id.timestamp.body))). 201 with webhook_secret for v1 (only here); the same key, " +
        "public id and URL again → 200 with the existing subscription and no secret. A URL that is not https, carries user " +
        "information, is longer than 2,048 characters or resolves to an internal address → 422 invalid-webhook-url.")
  )
  .add(
    HttpApiEndpoint.get("list", "/subscriptions", {
      query: {
        // Checked here, so text a database cannot hold (NUL, lone surrogates) is a 422 and never reaches SQL.
        after: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^sub_[0-9A-HJKMNP-TV-Z]{26}$/u, {
          message: "must be a subscription_id (sub_ + ULID), as next_after gives it"
        })).annotate({ description: "A subscription_id: return those created after it (next_after)" })),
        limit: QueryInt(`must be an integer between 1 and ${MaxSubscriptionPage}`, `Page size, default 50, at most ${MaxSubscriptionPage}`,
          1, MaxSubscriptionPage)
      },
      success: SubscriptionPage,
      error: [ValidationFailed]
    })
      .annotate(OpenApi.Summary, "The tenant's subscriptions, oldest first")
      .annotate(OpenApi.Description,
        "Every subscription of the key's tenant, pull and webhook, with the same members as GET one. Follow next_after " +
        "(pass it as `after`) until it is null.")
  )
  .add(
    HttpApiEndpoint.get("get", "/subscriptions/:subscriptionId", {
      params: SubscriptionPath,
      success: Subscription,
      error: NotFound
    })
      .annotate(OpenApi.Summary, "A subscription and how its delivery goes")
      .annotate(OpenApi.Description,
        "delivered_through (last acknowledged sequence), pending, attempts, last_attempt_at, last_error, next_attempt_at; " +
        "disabled_reason (gone: the receiver answered 410; failing: failed for PV_WEBHOOK_MAX_FAILURE_SECONDS). " +
        "Another tenant's subscription is 404 not-found.")
  )
  .add(
    HttpApiEndpoint.delete("delete", "/subscriptions/:subscriptionId", {
      params: SubscriptionPath,
      success: HttpApiSchema.NoContent,
      error: NotFound
    })
      .annotate(OpenApi.Summary, "Delete a subscription: nothing is sent afterwards")
      .annotate(OpenApi.Description,
        "An attempt already in flight may still arrive; no further one is made. The events stay readable at events_url.")
  )
  .add(
    HttpApiEndpoint.post("resume", "/subscriptions/:subscriptionId/resume", {
      params: SubscriptionPath,
      success: Subscription,
      error: NotFound
    })
      .annotate(OpenApi.Summary, "Resume a disabled subscription")
      .annotate(OpenApi.Description, "Delivery restarts at the first unacknowledged event; an active subscription is returned unchanged.")
  )
  .add(
    HttpApiEndpoint.post("rotateSecret", "/subscriptions/:subscriptionId/rotate-secret", {
      params: SubscriptionPath,
      success: Subscription,
      error: NotFound
    })
      .annotate(OpenApi.Summary, "A new webhook secret")
      .annotate(OpenApi.Description,
        "Returns the new webhook_secret (only here). For 24 hours both secrets sign every delivery: webhook-signature carries " +
        "two v1 signatures separated by a space, so a receiver can switch without a gap. A pull or v1a subscription has no " +
        "secret: 404 not-found.")
  )
  .add(
    HttpApiEndpoint.get("attempts", "/subscriptions/:subscriptionId/attempts", {
      params: SubscriptionPath,
      query: {
        // Checked here, so text a database cannot hold (NUL, lone surrogates) is a 422 and never reaches SQL.
        after: Schema.optionalKey(Schema.String.check(Schema.isPattern(AttemptIdPattern, {
          message: "must be an attempt_id (att_ + ULID), as next_after gives it"
        })).annotate({ description: "An attempt_id: return the attempts older than it (next_after)" })),
        limit: QueryInt(`must be an integer between 1 and ${MaxPageSize}`, `Page size, default ${DefaultPageSize}, at most ${MaxPageSize}`,
          1, MaxPageSize)
      },
      success: WebhookAttemptPage,
      error: [NotFound, ValidationFailed]
    })
      .annotate(OpenApi.Summary, "A subscription's delivery attempts, newest first")
      .annotate(OpenApi.Description,
        "Every attempt to POST an event to the webhook (at least the last 100 are kept): attempt_id, event_id, sequence, started_at, " +
        "duration_ms, status (the receiver's HTTP status, or null), outcome (delivered, failed, timeout, refused) and error. " +
        "Follow next_after (pass it as `after`) until it is null. Another tenant's subscription is 404 not-found.")
  )
  .add(
    HttpApiEndpoint.post("redeliver", "/subscriptions/:subscriptionId/redeliver", {
      params: SubscriptionPath,
      payload: RedeliverRequest,
      success: Subscription.pipe(HttpApiSchema.status(202)),
      error: [NotFound, ValidationFailed]
    })
      .annotate(OpenApi.Summary, "Deliver a webhook subscription's events again from a sequence")
      .annotate(OpenApi.Description,
        "The events from from_sequence (1 to the chain head) are delivered again, in order, with their original webhook-id, " +
        "after the attempt in flight if any; events not yet acknowledged stay owed. A disabled subscription is resumed. " +
        "202 with the subscription. A pull subscription, or a sequence outside 1 to the head → 422 validation-failed.")
  )
  // Every endpoint needs an API key with scope subscription:write and sees only its own tenant's subscriptions.
  .middleware(ApiKeyAuth)
  .annotateEndpoints(RequiredScope, "subscription:write")
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "Subscriptions and webhooks") {}
