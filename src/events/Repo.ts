import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { FreshnessState, LifecycleState } from "../domain/Freshness.js"
import type { EventHead } from "../domain/MachineTrust.js"
import { PublicId } from "../domain/PublicId.js"
import { EventType, type EventJwk, type EventPayload, type TrustEvent } from "../domain/TrustEvent.js"

/** A payload as stored: sealed (hashed and signed) when it was appended and never changed, so its shape is checked only. */
const StoredPayload = Schema.declare((u: unknown): u is EventPayload => typeof u === "object" && u !== null && !Array.isArray(u))

const EventRow = Schema.Struct({
  public_id: Schema.String,
  sequence: Schema.Int,
  event_id: Schema.String,
  type: EventType,
  occurred_at: Schema.Date,
  payload: StoredPayload,
  previous_event_hash: Schema.NullOr(Schema.String),
  event_hash: Schema.String,
  kid: Schema.String,
  sig: Schema.String
})

const HeadRow = Schema.Struct({ head_sequence: Schema.Int, head_hash: Schema.NullOr(Schema.String) })
const KeyRow = Schema.Struct({ kid: Schema.String, x: Schema.String })
const DueRow = Schema.Struct({ public_id: PublicId })

/** Rows are what this code wrote: one that does not match its schema is a defect, not an error to handle. */
const decodeRows = <S extends Schema.Codec<any, any>>(schema: S) => {
  const decode = Schema.decodeUnknownEffect(Schema.Array(schema))
  return <E, R>(query: Effect.Effect<ReadonlyArray<unknown>, E, R>): Effect.Effect<ReadonlyArray<S["Type"]>, E, R> =>
    Effect.flatMap(query, (rows) => Effect.orDie(decode(rows)))
}
const eventRows = decodeRows(EventRow)
const headRows = decodeRows(HeadRow)

const toHead = (row: typeof HeadRow.Type): EventHead => ({ sequence: row.head_sequence, eventHash: row.head_hash })

const toEvent = (row: typeof EventRow.Type): TrustEvent => ({
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
const FreshnessRow = Schema.Struct({
  public_id: Schema.String,
  determination_id: Schema.String,
  as_of: Schema.Date,
  valid_until: Schema.Date,
  lifecycle_state: LifecycleState,
  freshness_announced: Schema.NullOr(FreshnessState)
})
export type FreshnessRow = typeof FreshnessRow.Type
const freshnessRows = decodeRows(FreshnessRow)

const SubscriptionRow = Schema.Struct({
  subscription_id: Schema.String,
  tenant_id: Schema.String,
  key_id: Schema.String,
  public_id: PublicId,
  after_sequence: Schema.Int,
  created_at: Schema.Date
})
export type SubscriptionRow = typeof SubscriptionRow.Type
const subscriptionRows = decodeRows(SubscriptionRow)

const make = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient

  // No conflict target: `kid` and `x` are both unique, and two processes starting at once (PV_WORKERS)
  // may insert the same key concurrently; with `ON CONFLICT (kid)` the race could surface on `x` instead.
  const recordKey = (jwk: EventJwk, at: Date) =>
    sql`
      INSERT INTO event_signing_keys (kid, x, created_at) VALUES (${jwk.kid}, ${jwk.x}, ${at})
      ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)

  const keys = decodeRows(KeyRow)(sql`SELECT kid, x FROM event_signing_keys ORDER BY created_at, kid`)

  /** Inside a transaction: the chain head, locked on the determinations row every writer locks. */
  const lockHead = (publicId: PublicId) =>
    headRows(sql`SELECT head_sequence, head_hash FROM determinations WHERE public_id = ${publicId} FOR UPDATE`).pipe(
      Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toHead))
    )

  /** The committed head of a stored determination, none when there is no such determination. */
  const head = (publicId: PublicId) =>
    headRows(sql`
      SELECT head_sequence, head_hash FROM determinations
      WHERE public_id = ${publicId} AND current_version_id IS NOT NULL`).pipe(
      Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toHead))
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
  const page = (publicId: PublicId, after: number, through: number, limit: number) =>
    eventRows(sql`
      SELECT public_id, sequence, event_id, type, occurred_at, payload, previous_event_hash, event_hash, kid, sig
      FROM events
      WHERE public_id = ${publicId} AND sequence > ${after} AND sequence <= ${through}
      ORDER BY sequence
      LIMIT ${limit}`).pipe(Effect.map((rows) => rows.map(toEvent)))

  const setFreshness = (publicId: PublicId, announced: FreshnessState, dueAt: Date | null) =>
    sql`
      UPDATE determinations SET freshness_announced = ${announced}, freshness_due_at = ${dueAt}
      WHERE public_id = ${publicId}`.pipe(Effect.asVoid)

  /** Determinations whose next freshness boundary has passed, oldest first. */
  const dueForFreshness = (now: Date, limit: number) =>
    decodeRows(DueRow)(sql`
      SELECT public_id FROM determinations
      WHERE freshness_due_at IS NOT NULL AND freshness_due_at <= ${now}
      ORDER BY freshness_due_at, public_id
      LIMIT ${limit}`).pipe(Effect.map((rows) => rows.map((r) => r.public_id)))

  /**
   * Inside a transaction: lock the row, then read the current version's dates and the announced state
   * in a second statement, which sees whatever a writer we waited for committed.
   */
  const lockFreshness = (publicId: PublicId) =>
    Effect.andThen(
      sql`SELECT 1 FROM determinations WHERE public_id = ${publicId} FOR UPDATE`,
      freshnessRows(sql`
        SELECT d.public_id, v.determination_id, v.as_of, v.valid_until, v.lifecycle_state, d.freshness_announced
        FROM determinations d JOIN determination_versions v ON v.determination_id = d.current_version_id
        WHERE d.public_id = ${publicId}`)
    ).pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])))

  const insertSubscription = (row: SubscriptionRow) =>
    subscriptionRows(sql`
      INSERT INTO subscriptions (subscription_id, tenant_id, key_id, public_id, after_sequence, created_at, pending_through, delivered_through)
      VALUES (${row.subscription_id}, ${row.tenant_id}, ${row.key_id}, ${row.public_id}, ${row.after_sequence}, ${row.created_at},
        ${row.after_sequence}, ${row.after_sequence})
      ON CONFLICT (key_id, public_id, coalesce(webhook_url, '')) DO NOTHING
      RETURNING *`).pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])))

  const findSubscription = (keyId: string, publicId: PublicId) =>
    subscriptionRows(sql`SELECT * FROM subscriptions WHERE key_id = ${keyId} AND public_id = ${publicId} AND webhook_url IS NULL`).pipe(
      Effect.map((rows) => Option.fromNullishOr(rows[0]))
    )

  const subscriptionById = (subscriptionId: string, tenantId: string) =>
    subscriptionRows(sql`SELECT * FROM subscriptions WHERE subscription_id = ${subscriptionId} AND tenant_id = ${tenantId}`).pipe(
      Effect.map((rows) => Option.fromNullishOr(rows[0]))
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

/** SQL for event chains, signing keys and subscriptions. Nothing here decides anything. */
export class EventsRepo extends Context.Service<EventsRepo, Effect.Success<typeof make>>()("pv/EventsRepo", { make }) {
  static readonly layer = Layer.effect(EventsRepo, make)
}
