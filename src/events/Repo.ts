import { PgClient } from "@effect/sql-pg"
import { Effect, Option } from "effect"
import type { EventHead } from "../domain/MachineTrust.js"
import type { EventJwk, EventType, TrustEvent } from "../domain/TrustEvent.js"
import type { FreshnessState, LifecycleState } from "../trust/Freshness.js"

interface EventRow {
  readonly public_id: string
  readonly sequence: number
  readonly event_id: string
  readonly type: EventType
  readonly occurred_at: Date
  readonly payload: TrustEvent["payload"]
  readonly previous_event_hash: string | null
  readonly event_hash: string
  readonly kid: string
  readonly sig: string
}

const toEvent = (row: EventRow): TrustEvent => ({
  sequence: row.sequence,
  event_id: row.event_id,
  public_id: row.public_id,
  type: row.type,
  occurred_at: row.occurred_at.toISOString(),
  payload: row.payload,
  previousEventHash: row.previous_event_hash,
  eventHash: row.event_hash,
  signature: { alg: "Ed25519", kid: row.kid, sig: row.sig }
})

/** What the freshness sweep needs of one determination, read under its row lock. */
export interface FreshnessRow {
  readonly public_id: string
  readonly determination_id: string
  readonly as_of: Date
  readonly valid_until: Date
  readonly lifecycle_state: LifecycleState
  readonly freshness_announced: FreshnessState | null
}

export interface SubscriptionRow {
  readonly subscription_id: string
  readonly tenant_id: string
  readonly key_id: string
  readonly public_id: string
  readonly after_sequence: number
  readonly created_at: Date
}

/** SQL for event chains, signing keys and subscriptions. Nothing here decides anything. */
export class EventsRepo extends Effect.Service<EventsRepo>()("pv/EventsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* PgClient.PgClient

    const recordKey = (jwk: EventJwk, at: Date) =>
      sql`
        INSERT INTO event_signing_keys (kid, x, created_at) VALUES (${jwk.kid}, ${jwk.x}, ${at})
        ON CONFLICT (kid) DO NOTHING`.pipe(Effect.asVoid)

    const keys = sql<{ kid: string; x: string }>`SELECT kid, x FROM event_signing_keys ORDER BY created_at, kid`

    /** Inside a transaction: the chain head, locked on the determinations row every writer locks. */
    const lockHead = (publicId: string) =>
      sql<{ head_sequence: number; head_hash: string | null }>`
        SELECT head_sequence, head_hash FROM determinations WHERE public_id = ${publicId} FOR UPDATE`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (r): EventHead => ({ sequence: r.head_sequence, eventHash: r.head_hash })))
      )

    /** The committed head of a stored determination, none when there is no such determination. */
    const head = (publicId: string) =>
      sql<{ head_sequence: number; head_hash: string | null }>`
        SELECT head_sequence, head_hash FROM determinations
        WHERE public_id = ${publicId} AND current_version_id IS NOT NULL`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (r): EventHead => ({ sequence: r.head_sequence, eventHash: r.head_hash })))
      )

    /** Insert the event and move the head in the same statement pair; the primary key refuses a duplicate sequence. */
    const insertEvent = (event: TrustEvent) =>
      Effect.gen(function*() {
        yield* sql`
          INSERT INTO events (public_id, sequence, event_id, type, occurred_at, payload, previous_event_hash, event_hash, kid, sig)
          VALUES (${event.public_id}, ${event.sequence}, ${event.event_id}, ${event.type}, ${new Date(event.occurred_at)},
            ${sql.json(event.payload)}, ${event.previousEventHash}, ${event.eventHash}, ${event.signature.kid}, ${event.signature.sig})`
        yield* sql`
          UPDATE determinations SET head_sequence = ${event.sequence}, head_hash = ${event.eventHash}
          WHERE public_id = ${event.public_id}`
      })

    /** Events with after < sequence <= through, ascending, at most `limit`. */
    const page = (publicId: string, after: number, through: number, limit: number) =>
      sql<EventRow>`
        SELECT public_id, sequence, event_id, type, occurred_at, payload, previous_event_hash, event_hash, kid, sig
        FROM events
        WHERE public_id = ${publicId} AND sequence > ${after} AND sequence <= ${through}
        ORDER BY sequence
        LIMIT ${limit}`.pipe(Effect.map((rows) => rows.map(toEvent)))

    const setFreshness = (publicId: string, announced: FreshnessState, dueAt: Date | null) =>
      sql`
        UPDATE determinations SET freshness_announced = ${announced}, freshness_due_at = ${dueAt}
        WHERE public_id = ${publicId}`.pipe(Effect.asVoid)

    /** Determinations whose next freshness boundary has passed, oldest first. */
    const dueForFreshness = (now: Date, limit: number) =>
      sql<{ public_id: string }>`
        SELECT public_id FROM determinations
        WHERE freshness_due_at IS NOT NULL AND freshness_due_at <= ${now}
        ORDER BY freshness_due_at, public_id
        LIMIT ${limit}`.pipe(Effect.map((rows) => rows.map((r) => r.public_id)))

    /**
     * Inside a transaction: lock the row, then read the current version's dates and the announced state
     * in a second statement, which sees whatever a writer we waited for committed.
     */
    const lockFreshness = (publicId: string) =>
      Effect.zipRight(
        sql`SELECT 1 FROM determinations WHERE public_id = ${publicId} FOR UPDATE`,
        sql<FreshnessRow>`
          SELECT d.public_id, v.determination_id, v.as_of, v.valid_until, v.lifecycle_state, d.freshness_announced
          FROM determinations d JOIN determination_versions v ON v.determination_id = d.current_version_id
          WHERE d.public_id = ${publicId}`
      ).pipe(Effect.map((rows) => Option.fromNullable(rows[0])))

    const insertSubscription = (row: SubscriptionRow) =>
      sql<SubscriptionRow>`
        INSERT INTO subscriptions (subscription_id, tenant_id, key_id, public_id, after_sequence, created_at)
        VALUES (${row.subscription_id}, ${row.tenant_id}, ${row.key_id}, ${row.public_id}, ${row.after_sequence}, ${row.created_at})
        ON CONFLICT (key_id, public_id) DO NOTHING
        RETURNING *`.pipe(Effect.map((rows) => Option.fromNullable(rows[0])))

    const findSubscription = (keyId: string, publicId: string) =>
      sql<SubscriptionRow>`SELECT * FROM subscriptions WHERE key_id = ${keyId} AND public_id = ${publicId}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    const subscriptionById = (subscriptionId: string, tenantId: string) =>
      sql<SubscriptionRow>`SELECT * FROM subscriptions WHERE subscription_id = ${subscriptionId} AND tenant_id = ${tenantId}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    return {
      recordKey,
      keys,
      lockHead,
      head,
      insertEvent,
      page,
      setFreshness,
      dueForFreshness,
      lockFreshness,
      insertSubscription,
      findSubscription,
      subscriptionById,
      withTransaction: sql.withTransaction
    } as const
  })
}) {}
