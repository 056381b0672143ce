import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { type DeterminationNotFound, NotFound } from "../domain/Problem.js"
import type { PublicId } from "../domain/PublicId.js"
import { Ids } from "../platform/Ids.js"
import { EventLog } from "./EventLog.js"
import { EventsRepo, type SubscriptionRow } from "./Repo.js"

/** What subscribe_trust_changes answers (contract section 7). */
export const Subscription = Schema.Struct({
  subscription_id: Schema.String,
  public_id: Schema.String,
  delivery: Schema.Literal("pull"),
  after: Schema.Int.annotate({ description: "The chain head when the subscription was made: changes are the events after it" }),
  events_url: Schema.String
}).annotate({ identifier: "Subscription" })
export type Subscription = typeof Subscription.Type

/** The key a subscription belongs to: its id (idempotency) and its tenant (ownership). */
export interface Subscriber {
  readonly key_id: string
  readonly tenant_id: string
}

export const eventsUrlOf = (publicId: string, after: number) =>
  `/api/v1/events?public_id=${encodeURIComponent(publicId)}&after=${after}`

const toSubscription = (row: SubscriptionRow): Subscription => ({
  subscription_id: row.subscription_id,
  public_id: row.public_id,
  delivery: "pull",
  after: row.after_sequence,
  events_url: eventsUrlOf(row.public_id, row.after_sequence)
})

const make = Effect.gen(function*() {
  const repo = yield* EventsRepo
  const events = yield* EventLog
  const ids = yield* Ids

  const subscribe = (subscriber: Subscriber, publicId: PublicId): Effect.Effect<Subscription, DeterminationNotFound> =>
    Effect.gen(function*() {
      const head = yield* events.head(publicId)
      const existing = yield* repo.findSubscription(subscriber.key_id, publicId)
      if (Option.isSome(existing)) return toSubscription(existing.value)
      const inserted = yield* repo.insertSubscription({
        subscription_id: yield* ids.make("sub"),
        tenant_id: subscriber.tenant_id,
        key_id: subscriber.key_id,
        public_id: publicId,
        after_sequence: head.sequence,
        created_at: new Date(yield* Clock.currentTimeMillis)
      })
      if (Option.isSome(inserted)) return toSubscription(inserted.value)
      // A concurrent call for the same key inserted first: answer with its subscription.
      const winner = yield* repo.findSubscription(subscriber.key_id, publicId)
      return toSubscription(Option.getOrThrow(winner))
    }).pipe(Effect.catchTag("SqlError", Effect.die))

  /** A subscription of the caller's tenant; another tenant's is not found. */
  const get = (tenantId: string, subscriptionId: string): Effect.Effect<Subscription, NotFound> =>
    Effect.orDie(repo.subscriptionById(subscriptionId, tenantId)).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new NotFound({ detail: `no subscription ${subscriptionId}` })),
        onSome: (row) => Effect.succeed(toSubscription(row))
      }))
    )

  return { subscribe, get } as const
})

/**
 * Pull subscriptions to a determination's event feed, owned by the subscribing key's tenant. One per
 * (key, determination): subscribing again returns the first subscription unchanged, racing callers included.
 */
export class Subscriptions extends Context.Service<Subscriptions, Effect.Success<typeof make>>()("pv/Subscriptions", { make }) {
  static readonly layerNoDeps = Layer.effect(Subscriptions, make)
  static readonly layer = Subscriptions.layerNoDeps.pipe(Layer.provide([EventsRepo.layer, EventLog.layer, Ids.layer]))
}
