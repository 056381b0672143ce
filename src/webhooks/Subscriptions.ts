import { Clock, Context, Duration, Effect, Layer, Option } from "effect"
import { type DeterminationNotFound, FieldError, InvalidWebhookUrl, NotFound, ValidationFailed } from "../domain/Problem.js"
import type { PublicId } from "../domain/PublicId.js"
import { AppConfig } from "../platform/Config.js"
import { Ids } from "../platform/Ids.js"
import { checkWebhookUrl, resolveWebhookUrl } from "./Address.js"
import type { WebhookAttempt, WebhookAttemptPage } from "./Attempts.js"
import { type AttemptRow, WebhookAttemptsRepo } from "./AttemptsRepo.js"
import { generateSecret, type SignatureScheme } from "./Signature.js"
import { ChangeFeed } from "../events/ChangeFeed.js"
import { EventLog } from "../events/EventLog.js"
import { EventsRepo, type SubscriptionRow } from "../events/Repo.js"
import { Subscription, SubscriptionPage } from "./SubscriptionsApi.js"

/** A subscription's answer and a page of them, as the definition (./SubscriptionsApi.ts) declares them. */
export { Subscription, SubscriptionPage }

/** The key a subscription belongs to: its id (idempotency) and its tenant (ownership). */
export interface Subscriber {
  readonly key_id: string
  readonly tenant_id: string
}

/** What a subscribe call did: made a subscription (with its secret, for a webhook) or found the caller's own. */
export interface Subscribed {
  readonly subscription: Subscription
  readonly created: boolean
}

export const eventsUrlOf = (publicId: string, after: number) =>
  `/api/v1/events?public_id=${encodeURIComponent(publicId)}&after=${after}`

/** How long a replaced secret keeps signing deliveries, so receivers can switch without a gap. */
export const SecretOverlapMs = 24 * 60 * 60 * 1000

/** Subscription ids are `sub_` + ULID; anything else names no subscription (and never reaches SQL). */
const SubscriptionIdPattern = /^sub_[0-9A-HJKMNP-TV-Z]{26}$/u

const toSubscription = (row: SubscriptionRow, secret?: string): Subscription => {
  const webhook = row.webhook_url !== null
  const pending = Math.max(0, row.pending_through - row.delivered_through)
  return {
    subscription_id: row.subscription_id,
    public_id: row.public_id,
    delivery: webhook ? "webhook" : "pull",
    after: row.after_sequence,
    events_url: eventsUrlOf(row.public_id, row.after_sequence),
    ...(row.webhook_url !== null ? { webhook_url: row.webhook_url, signature_scheme: row.signature_scheme } : {}),
    ...(secret !== undefined ? { webhook_secret: secret } : {}),
    status: row.status,
    disabled_reason: row.status === "disabled" ? row.disabled_reason : null,
    created_at: row.created_at.toISOString(),
    delivered_through: webhook ? row.delivered_through : null,
    pending: webhook ? pending : null,
    attempts: row.attempts,
    last_attempt_at: row.last_attempt_at?.toISOString() ?? null,
    last_error: row.last_error,
    next_attempt_at: webhook && pending > 0 && row.status === "active" ? row.next_attempt_at.toISOString() : null
  }
}

const toAttempt = (row: AttemptRow): WebhookAttempt => ({ ...row, started_at: row.started_at.toISOString() })

/** A refused redelivery: 422 with the pointer to blame (the whole body for a pull subscription). */
const invalidRedelivery = (pointer: string, detail: string) =>
  new ValidationFailed({ detail, errors: [new FieldError({ pointer, detail })] })
const schemeDetail = "applies only to a webhook subscription (with webhook_url)"
const schemeWithoutWebhook = new ValidationFailed({
  detail: `signature_scheme ${schemeDetail}.`,
  errors: [new FieldError({ pointer: "/signature_scheme", detail: schemeDetail })]
})

const invalidUrl = (detail: string) =>
  new InvalidWebhookUrl({ detail, errors: [new FieldError({ pointer: "/webhook_url", detail })] })

/** The methods of `Subscriptions` (none is on a measured hot path: each is an `Effect.fn`). */
export interface SubscriptionsShape {
  /**
   * Subscribes the key to a determination's feed (pull, or a webhook URL signed by `signatureScheme`, default v1); again for
   * the same target: the first subscription, whatever scheme it signs with.
   */
  readonly subscribe: (
    subscriber: Subscriber,
    publicId: PublicId,
    webhookUrl?: string,
    signatureScheme?: SignatureScheme
  ) => Effect.Effect<Subscribed, DeterminationNotFound | InvalidWebhookUrl | ValidationFailed>
  readonly get: (tenantId: string, subscriptionId: string) => Effect.Effect<Subscription, NotFound>
  readonly list: (tenantId: string, options: { readonly after?: string | undefined; readonly limit: number }) => Effect.Effect<SubscriptionPage>
  readonly remove: (tenantId: string, subscriptionId: string) => Effect.Effect<void, NotFound>
  readonly resume: (tenantId: string, subscriptionId: string) => Effect.Effect<Subscription, NotFound>
  readonly rotateSecret: (tenantId: string, subscriptionId: string) => Effect.Effect<Subscription, NotFound>
  /** A subscription's delivery attempts, newest first (a pull subscription has none). */
  readonly attempts: (
    tenantId: string,
    subscriptionId: string,
    options: { readonly after?: string | undefined; readonly limit: number }
  ) => Effect.Effect<WebhookAttemptPage, NotFound>
  /** A webhook subscription's events from `fromSequence` on are delivered again, in order; a disabled one resumes. */
  readonly redeliver: (tenantId: string, subscriptionId: string, fromSequence: number) => Effect.Effect<Subscription, NotFound | ValidationFailed>
}

const make = Effect.gen(function*() {
  const repo = yield* EventsRepo
  const attemptsRepo = yield* WebhookAttemptsRepo
  const events = yield* EventLog
  const feed = yield* ChangeFeed
  const ids = yield* Ids
  const config = yield* AppConfig
  const urlRules = { allowHttp: config.webhookAllowHttp, allowPrivate: config.webhookAllowPrivate }

  /**
   * The URL as stored (WHATWG-normalised, so NUL bytes and lone surrogates arrive percent-encoded), after
   * the syntax rules and a look-up of every address the host has now. Each attempt checks again, against
   * the address it actually connects to (webhooks/Send.ts).
   */
  const acceptUrl = (raw: string): Effect.Effect<string, InvalidWebhookUrl> =>
    Effect.gen(function*() {
      const checked = checkWebhookUrl(raw, urlRules)
      if (!checked.ok) return yield* Effect.fail(invalidUrl(checked.reason))
      // A name server that never answers must not hold the request: bounded like an attempt.
      const resolved = yield* Effect.promise(() => resolveWebhookUrl(checked.url, urlRules)).pipe(
        Effect.timeoutOrElse({
          duration: Duration.seconds(5),
          orElse: () => Effect.succeed({ ok: false as const, reason: `${checked.url.hostname} did not resolve within 5 s` })
        })
      )
      if (!resolved.ok) return yield* Effect.fail(invalidUrl(resolved.reason))
      return checked.url.href
    })

  const subscribe = Effect.fn("Subscriptions.subscribe")((
    subscriber: Subscriber,
    publicId: PublicId,
    webhookUrl?: string,
    signatureScheme?: SignatureScheme
  ): Effect.Effect<Subscribed, DeterminationNotFound | InvalidWebhookUrl | ValidationFailed> =>
    Effect.gen(function*() {
      if (webhookUrl === undefined && signatureScheme !== undefined) return yield* Effect.fail(schemeWithoutWebhook)
      const scheme = signatureScheme ?? "v1"
      const url = webhookUrl === undefined ? null : yield* acceptUrl(webhookUrl)
      yield* events.head(publicId) // an unknown determination is 404
      const existing = yield* repo.findSubscription(subscriber.key_id, publicId, url)
      if (Option.isSome(existing)) return { subscription: toSubscription(existing.value), created: false }
      const secret = url !== null && scheme === "v1" ? generateSecret() : null
      // `after` is the head as this insert finds it, in the same statement (EventsRepo.insertSubscription).
      const inserted = yield* repo.insertSubscription({
        subscription_id: yield* ids.make("sub"),
        tenant_id: subscriber.tenant_id,
        key_id: subscriber.key_id,
        public_id: publicId,
        created_at: new Date(yield* Clock.currentTimeMillis),
        webhook_url: url,
        signature_scheme: scheme,
        secret
      })
      if (Option.isSome(inserted)) return { subscription: toSubscription(inserted.value, secret ?? undefined), created: true }
      // A concurrent call for the same key and target inserted first: answer with its subscription.
      const winner = yield* repo.findSubscription(subscriber.key_id, publicId, url)
      return { subscription: toSubscription(Option.getOrThrow(winner)), created: false }
    }).pipe(Effect.catchTag("SqlError", Effect.die)))

  const notFound = (subscriptionId: string) => new NotFound({ detail: `no subscription ${subscriptionId}` })

  /** The row of a subscription of the caller's tenant; another tenant's (or a malformed id) is not found. */
  const owned = <A, E>(
    subscriptionId: string,
    query: Effect.Effect<Option.Option<A>, E>
  ): Effect.Effect<A, NotFound> =>
    SubscriptionIdPattern.test(subscriptionId)
      ? Effect.orDie(query).pipe(Effect.flatMap(Option.match({
        onNone: () => Effect.fail(notFound(subscriptionId)),
        onSome: Effect.succeed
      })))
      : Effect.fail(notFound(subscriptionId))

  const get = Effect.fn("Subscriptions.get")((tenantId: string, subscriptionId: string): Effect.Effect<Subscription, NotFound> =>
    Effect.map(owned(subscriptionId, repo.subscriptionById(subscriptionId, tenantId)), (row) => toSubscription(row)))

  const list = Effect.fn("Subscriptions.list")((tenantId: string, options: { readonly after?: string | undefined; readonly limit: number }): Effect.Effect<SubscriptionPage> =>
    Effect.orDie(repo.listSubscriptions(tenantId, options.after ?? "", options.limit + 1)).pipe(
      Effect.map((rows) => {
        const page = rows.slice(0, options.limit).map((row) => toSubscription(row))
        return { subscriptions: page, next_after: rows.length > options.limit ? page[page.length - 1]!.subscription_id : null }
      })
    ))

  /** Deleted: nothing is sent afterwards (an attempt in flight finds no row to acknowledge and stops). */
  const remove = Effect.fn("Subscriptions.remove")((tenantId: string, subscriptionId: string): Effect.Effect<void, NotFound> =>
    owned(subscriptionId, Effect.map(repo.deleteSubscription(subscriptionId, tenantId), (deleted) => deleted ? Option.some(true) : Option.none()))
      .pipe(Effect.asVoid))

  /**
   * A disabled subscription becomes active and delivery restarts at the first unacknowledged event, woken
   * at once on every instance (the change feed); resuming an active one changes nothing.
   */
  const resume = Effect.fn("Subscriptions.resume")((tenantId: string, subscriptionId: string): Effect.Effect<Subscription, NotFound> =>
    Effect.gen(function*() {
      const row = yield* owned(subscriptionId, repo.subscriptionById(subscriptionId, tenantId))
      if (row.status === "active") return toSubscription(row)
      const resumed = yield* Effect.orDie(repo.withTransaction(Effect.tap(
        repo.resumeSubscription(subscriptionId, tenantId),
        (found) => Option.isSome(found) ? feed.notify(row.public_id) : Effect.void
      )))
      yield* feed.committed(row.public_id)
      return toSubscription(Option.getOrElse(resumed, () => row))
    }))

  /** A new secret for a v1 webhook subscription; the replaced one keeps signing beside it for 24 hours. Pull and v1a ones have none. */
  const rotateSecret = Effect.fn("Subscriptions.rotateSecret")((tenantId: string, subscriptionId: string): Effect.Effect<Subscription, NotFound> =>
    Effect.gen(function*() {
      const secret = generateSecret()
      const until = new Date((yield* Clock.currentTimeMillis) + SecretOverlapMs)
      const row = yield* owned(subscriptionId, repo.rotateSecret(subscriptionId, tenantId, secret, until)).pipe(
        Effect.catchTag("NotFound", () =>
          Effect.flatMap(get(tenantId, subscriptionId), (found) =>
            Effect.fail(new NotFound({
              detail: found.delivery === "pull"
                ? `subscription ${subscriptionId} is a pull subscription: it has no secret`
                : `subscription ${subscriptionId} signs with v1a (the service's key, GET /api/v1/webhooks/signing-key): it has no secret`
            }))))
      )
      return toSubscription(row, secret)
    }))

  const attempts = Effect.fn("Subscriptions.attempts")((
    tenantId: string,
    subscriptionId: string,
    options: { readonly after?: string | undefined; readonly limit: number }
  ): Effect.Effect<WebhookAttemptPage, NotFound> =>
    Effect.gen(function*() {
      yield* owned(subscriptionId, repo.subscriptionById(subscriptionId, tenantId))
      const rows = yield* Effect.orDie(attemptsRepo.page(subscriptionId, options.after ?? null, options.limit + 1))
      const page = rows.slice(0, options.limit).map(toAttempt)
      return { attempts: page, next_after: rows.length > options.limit ? page[page.length - 1]!.attempt_id : null }
    }))

  /**
   * Redelivery (webhooks/AttemptsRepo.ts `redeliver`): the acknowledged position goes back to
   * `fromSequence - 1`, at once or, with an attempt in flight, when its outcome is recorded; every instance
   * is woken, as by resume. 1 ≤ fromSequence ≤ the chain head, and only for webhook subscriptions.
   */
  const redeliver = Effect.fn("Subscriptions.redeliver")((
    tenantId: string,
    subscriptionId: string,
    fromSequence: number
  ): Effect.Effect<Subscription, NotFound | ValidationFailed> =>
    Effect.gen(function*() {
      const row = yield* owned(subscriptionId, repo.subscriptionById(subscriptionId, tenantId))
      if (row.webhook_url === null) {
        return yield* Effect.fail(invalidRedelivery("", `subscription ${subscriptionId} is a pull subscription: nothing is sent to it; read events_url`))
      }
      const head = yield* events.head(row.public_id).pipe(Effect.orDie)
      if (fromSequence < 1 || fromSequence > head.sequence) {
        return yield* Effect.fail(invalidRedelivery("/from_sequence", `must be an integer from 1 to the chain head, ${head.sequence}`))
      }
      // The answer is the row as the redelivery left it, read before any worker can move it on.
      const redone = yield* Effect.orDie(repo.withTransaction(Effect.gen(function*() {
        const found = yield* attemptsRepo.redeliver(subscriptionId, tenantId, fromSequence)
        if (Option.isNone(found)) return Option.none()
        yield* feed.notify(found.value)
        return yield* repo.subscriptionById(subscriptionId, tenantId)
      })))
      if (Option.isNone(redone)) return yield* Effect.fail(notFound(subscriptionId))
      yield* feed.committed(redone.value.public_id)
      return toSubscription(redone.value)
    }))

  return { subscribe, get, list, remove, resume, rotateSecret, attempts, redeliver } satisfies SubscriptionsShape
})

/**
 * Subscriptions to a determination's event feed, owned by the subscribing key's tenant: pull ones (read
 * `events_url`) and webhook ones (webhooks/Deliveries.ts sends each event). One per (key, determination,
 * webhook URL): subscribing again returns the first subscription unchanged, racing callers included.
 */
export class Subscriptions extends Context.Service<Subscriptions, SubscriptionsShape>()("pv/Subscriptions", { make }) {
  static readonly layerNoDeps = Layer.effect(Subscriptions, make)
  static readonly layer = Subscriptions.layerNoDeps.pipe(
    Layer.provide([EventsRepo.layer, WebhookAttemptsRepo.layer, EventLog.layer, Ids.layer, ChangeFeed.layer])
  )
}
