import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { FreshnessState, LifecycleState } from "../domain/Freshness.js"
import type { EventHead } from "../domain/MachineTrust.js"
import { PublicId } from "../domain/PublicId.js"
import * as Rows from "../platform/Rows.js"
import { EventType, type EventJwk, type EventPayload, type TrustEvent } from "../domain/TrustEvent.js"
import { SignatureScheme } from "../domain/SignatureScheme.js"

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

const SubscriptionRow = Schema.Struct({
  subscription_id: Schema.String,
  tenant_id: Schema.String,
  key_id: Schema.String,
  public_id: PublicId,
  after_sequence: Schema.Int,
  created_at: Schema.Date,
  webhook_url: Schema.NullOr(Schema.String),
  signature_scheme: SignatureScheme,
  status: Schema.Literals(["active", "disabled"]),
  disabled_reason: Schema.NullOr(Schema.Literals(["gone", "failing"])),
  pending_through: Schema.Int,
  delivered_through: Schema.Int,
  attempts: Schema.Int,
  last_attempt_at: Schema.NullOr(Schema.Date),
  last_error: Schema.NullOr(Schema.String),
  next_attempt_at: Schema.Date
})
export type SubscriptionRow = typeof SubscriptionRow.Type

/** A new subscription; a webhook one signing with `v1` comes with its first secret. Its `after` is the head when it is inserted. */
export interface NewSubscription {
  readonly subscription_id: string
  readonly tenant_id: string
  readonly key_id: string
  readonly public_id: PublicId
  readonly created_at: Date
  readonly webhook_url: string | null
  readonly signature_scheme: SignatureScheme
  readonly secret: string | null
}

/**
 * What signs a subscription's deliveries, as the claim and every acknowledgement read it: each attempt is
 * signed with the secrets current when the statement before it ran, so a rotation signs the very next attempt.
 */
const SigningFields = {
  signature_scheme: SignatureScheme,
  secret: Schema.NullOr(Schema.String),
  previous_secret: Schema.NullOr(Schema.String),
  previous_secret_until: Schema.NullOr(Schema.Date)
}
export type SigningRow = Schema.Struct<typeof SigningFields>["Type"]
/** The columns of `SigningFields`, as the statements that return them name them. */
const SigningColumns = "signature_scheme, secret, previous_secret, previous_secret_until"

/** What a delivery worker needs of a subscription it has claimed (secrets included: they never leave the worker). */
const ClaimedRow = Schema.Struct({
  subscription_id: Schema.String,
  public_id: PublicId,
  webhook_url: Schema.String,
  ...SigningFields,
  pending_through: Schema.Int,
  delivered_through: Schema.Int,
  attempts: Schema.Int,
  webhook_origin: Schema.String,
  held_step: Schema.NullOr(Schema.Int)
})
export type ClaimedRow = typeof ClaimedRow.Type

const AckRow = Schema.Struct({ pending_through: Schema.Int, released: Schema.Int, ...SigningFields })
const FailRow = Schema.Struct({
  status: Schema.Literals(["active", "disabled"]),
  disabled_reason: Schema.NullOr(Schema.Literals(["gone", "failing"])),
  next_attempt_at: Schema.Date,
  held: Schema.Int
})

/** A failed attempt, as the delivery worker records it (see `recordFailure`). */
export interface FailedAttempt {
  readonly subscriptionId: string
  readonly token: string
  readonly error: string
  /** The subscription's own backoff: its next attempt no sooner than this. */
  readonly retryMs: number
  readonly maxFailureSeconds: number
  /** The receiver answered 410 Gone: the subscription is disabled now (`disabled_reason` "gone"), nothing held back. */
  readonly gone: boolean
  /** Whom it holds back: the receiver's subscriptions ("origin"), this URL's, or nobody else ("none"). */
  readonly scope: "origin" | "url" | "none"
  /** The origin or the URL, as `scope` says (the URL for "none"). */
  readonly group: string
  /** The group probe's delay at backoff step 1, 2, … (the last one for every step after). */
  readonly stepDelaysMs: ReadonlyArray<number>
  /** How long after a probe falls due its outcome is known at the latest (time-out + margin). */
  readonly outcomeMs: number
  /** Of `outcomeMs`, the margin past the time-out. */
  readonly marginMs: number
}
const FailedAttemptRequest = Schema.Struct({
  subscriptionId: Schema.String,
  token: Schema.String,
  error: Schema.String,
  retryMs: Schema.Number,
  maxFailureSeconds: Schema.Number,
  gone: Schema.Boolean,
  scope: Schema.String,
  group: Schema.String,
  stepDelaysMs: Schema.Array(Schema.Number),
  outcomeMs: Schema.Number,
  marginMs: Schema.Number
})
const WaitRow = Schema.Struct({ wait_ms: Schema.NullOr(Schema.Number) })
const DeliveryStatsRow = Schema.Struct({ pending: Schema.Number, disabled: Schema.Number })

type Sql<A> = Effect.Effect<A, SqlError>

export interface EventsRepoShape {
  readonly recordKey: (jwk: EventJwk, at: Date) => Sql<void>
  /** Every event signing key ever used, oldest first. */
  readonly keys: Sql<Array<{ readonly kid: string; readonly x: string }>>
  /** Inside a transaction: the chain head, locked on the determinations row every writer locks. */
  readonly lockHead: (publicId: PublicId) => Sql<Option.Option<EventHead>>
  /** The committed head of a stored determination, none when there is no such determination. */
  readonly head: (publicId: PublicId) => Sql<Option.Option<EventHead>>
  readonly insertEvent: (event: TrustEvent) => Sql<void>
  /** Events with after < sequence <= through, ascending, at most `limit`. */
  readonly page: (publicId: PublicId, after: number, through: number, limit: number) => Sql<Array<TrustEvent>>
  readonly setFreshness: (publicId: PublicId, announced: FreshnessState, dueAt: Date | null) => Sql<void>
  readonly dueForFreshness: (now: Date, limit: number) => Sql<Array<PublicId>>
  readonly lockFreshness: (publicId: PublicId) => Sql<Option.Option<FreshnessRow>>
  readonly insertSubscription: (row: NewSubscription) => Sql<Option.Option<SubscriptionRow>>
  readonly findSubscription: (keyId: string, publicId: PublicId, webhookUrl: string | null) => Sql<Option.Option<SubscriptionRow>>
  readonly subscriptionById: (subscriptionId: string, tenantId: string) => Sql<Option.Option<SubscriptionRow>>
  readonly listSubscriptions: (tenantId: string, after: string, limit: number) => Sql<Array<SubscriptionRow>>
  readonly deleteSubscription: (subscriptionId: string, tenantId: string) => Sql<boolean>
  readonly resumeSubscription: (subscriptionId: string, tenantId: string) => Sql<Option.Option<SubscriptionRow>>
  readonly rotateSecret: (subscriptionId: string, tenantId: string, secret: string, previousUntil: Date) => Sql<Option.Option<SubscriptionRow>>
  readonly owe: (publicId: PublicId, sequence: number) => Sql<void>
  readonly claim: (limit: number, token: string, leaseMs: number) => Sql<Array<ClaimedRow>>
  readonly acknowledge: (
    subscriptionId: string,
    token: string,
    sequence: number,
    leaseMs: number,
    releaseOrigin: string | null,
    keepLease: boolean
  ) => Sql<Option.Option<{ readonly pending_through: number; readonly released: number } & SigningRow>>
  readonly recordFailure: (
    attempt: FailedAttempt
  ) => Sql<Option.Option<typeof FailRow.Type>>
  readonly releaseLeases: (token: string) => Sql<Array<PublicId>>
  readonly releaseStrayLeases: (token: string, keep: ReadonlyArray<string>, dueInMs: number) => Sql<void>
  readonly nextDueInMs: Sql<number | null>
  readonly deliveryStats: Sql<{ readonly pending: number; readonly disabled: number }>
  /** One stored event, or none. */
  readonly eventAt: (publicId: PublicId, sequence: number) => Sql<Option.Option<TrustEvent>>
  readonly withTransaction: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
}

/** The columns a subscription is read with (never the secrets). */
const SubscriptionColumns = `subscription_id, tenant_id, key_id, public_id, after_sequence, created_at, webhook_url, signature_scheme, status,
  disabled_reason, pending_through, delivered_through, attempts, last_attempt_at, last_error, next_attempt_at`

const make = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient

  // No conflict target: `kid` and `x` are both unique, and two processes starting at once (PV_WORKERS)
  // may insert the same key concurrently; with `ON CONFLICT (kid)` the race could surface on `x` instead.
  const recordKey = (jwk: EventJwk, at: Date) =>
    sql`
      INSERT INTO event_signing_keys (kid, x, created_at) VALUES (${jwk.kid}, ${jwk.x}, ${at})
      ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)

  const keys = Rows.all(KeyRow, sql`SELECT kid, x FROM event_signing_keys ORDER BY created_at, kid`)

  const lockedHead = Rows.findOneOption({
    Request: Schema.String,
    Result: HeadRow,
    execute: (publicId) => sql`SELECT head_sequence, head_hash FROM determinations WHERE public_id = ${publicId} FOR UPDATE`
  })
  /** Inside a transaction: the chain head, locked on the determinations row every writer locks. */
  const lockHead = (publicId: PublicId) => Effect.map(lockedHead(publicId), Option.map(toHead))

  const committedHead = Rows.findOneOption({
    Request: Schema.String,
    Result: HeadRow,
    execute: (publicId) => sql`
      SELECT head_sequence, head_hash FROM determinations
      WHERE public_id = ${publicId} AND current_version_id IS NOT NULL`
  })
  /** The committed head of a stored determination, none when there is no such determination. */
  const head = (publicId: PublicId) => Effect.map(committedHead(publicId), Option.map(toHead))

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

  const eventRows = Rows.findAll({
    Request: Schema.Struct({ publicId: Schema.String, after: Schema.Number, through: Schema.Number, limit: Schema.Number }),
    Result: EventRow,
    execute: ({ publicId, after, through, limit }) => sql`
      SELECT public_id, sequence, event_id, type, occurred_at, payload, previous_event_hash, event_hash, kid, sig
      FROM events
      WHERE public_id = ${publicId} AND sequence > ${after} AND sequence <= ${through}
      ORDER BY sequence
      LIMIT ${limit}`
  })
  /** Events with after < sequence <= through, ascending, at most `limit`. */
  const page = (publicId: PublicId, after: number, through: number, limit: number) =>
    Effect.map(eventRows({ publicId, after, through, limit }), (rows) => rows.map(toEvent))

  const setFreshness = (publicId: PublicId, announced: FreshnessState, dueAt: Date | null) =>
    sql`
      UPDATE determinations SET freshness_announced = ${announced}, freshness_due_at = ${dueAt}
      WHERE public_id = ${publicId}`.pipe(Effect.asVoid)

  const dueRows = Rows.findAll({
    Request: Schema.Struct({ now: Schema.Date, limit: Schema.Number }),
    Result: DueRow,
    execute: ({ now, limit }) => sql`
      SELECT public_id FROM determinations
      WHERE freshness_due_at IS NOT NULL AND freshness_due_at <= ${now}
      ORDER BY freshness_due_at, public_id
      LIMIT ${limit}`
  })
  /** Determinations whose next freshness boundary has passed, oldest first. */
  const dueForFreshness = (now: Date, limit: number) => Effect.map(dueRows({ now, limit }), (rows) => rows.map((r) => r.public_id))

  /**
   * Inside a transaction: lock the row, then read the current version's dates and the announced state
   * in a second statement, which sees whatever a writer we waited for committed.
   */
  const freshnessRow = Rows.findOneOption({
    Request: Schema.String,
    Result: FreshnessRow,
    execute: (publicId) => sql`
      SELECT d.public_id, v.determination_id, v.as_of, v.valid_until, v.lifecycle_state, d.freshness_announced
      FROM determinations d JOIN determination_versions v ON v.determination_id = d.current_version_id
      WHERE d.public_id = ${publicId}`
  })
  const lockFreshness = (publicId: PublicId) =>
    Effect.andThen(sql`SELECT 1 FROM determinations WHERE public_id = ${publicId} FOR UPDATE`, freshnessRow(publicId))

  const columns = sql.literal(SubscriptionColumns)
  const signing = sql.literal(SigningColumns)

  const insertSubscription = Rows.findOneOption({
    Request: Schema.Struct({
      subscription_id: Schema.String,
      tenant_id: Schema.String,
      key_id: Schema.String,
      public_id: Schema.String,
      created_at: Schema.Date,
      webhook_url: Schema.NullOr(Schema.String),
      signature_scheme: SignatureScheme,
      secret: Schema.NullOr(Schema.String)
    }),
    Result: SubscriptionRow,
    // `after` and the first owed event are fixed here, in one statement (no gap at the start, docs/ARCHITECTURE.md):
    // FOR SHARE waits for an append holding the head's row lock (FOR UPDATE) and then reads the head it
    // committed; an append that starts later waits for this statement's commit, and its `owe` (a later
    // statement, so a later snapshot under READ COMMITTED) sees the new row.
    execute: (row) => sql`
      INSERT INTO subscriptions (subscription_id, tenant_id, key_id, public_id, after_sequence, created_at, pending_through,
        delivered_through, webhook_url, signature_scheme, secret)
      SELECT ${row.subscription_id}, ${row.tenant_id}, ${row.key_id}, d.public_id, d.head_sequence, ${row.created_at},
        d.head_sequence, d.head_sequence, ${row.webhook_url}, ${row.signature_scheme}, ${row.secret}
      FROM (
        SELECT public_id, head_sequence FROM determinations
        WHERE public_id = ${row.public_id} AND current_version_id IS NOT NULL
        FOR SHARE
      ) d
      ON CONFLICT (key_id, public_id, coalesce(webhook_url, '')) DO NOTHING
      RETURNING ${columns}`
  })

  const subscriptionByKey = Rows.findOneOption({
    Request: Schema.Struct({ keyId: Schema.String, publicId: Schema.String, webhookUrl: Schema.NullOr(Schema.String) }),
    Result: SubscriptionRow,
    execute: ({ keyId, publicId, webhookUrl }) => sql`
      SELECT ${columns} FROM subscriptions
      WHERE key_id = ${keyId} AND public_id = ${publicId} AND coalesce(webhook_url, '') = ${webhookUrl ?? ""}`
  })
  const findSubscription = (keyId: string, publicId: PublicId, webhookUrl: string | null) => subscriptionByKey({ keyId, publicId, webhookUrl })

  const TenantSubscription = Schema.Struct({ subscriptionId: Schema.String, tenantId: Schema.String })
  const subscriptionRow = Rows.findOneOption({
    Request: TenantSubscription,
    Result: SubscriptionRow,
    execute: ({ subscriptionId, tenantId }) =>
      sql`SELECT ${columns} FROM subscriptions WHERE subscription_id = ${subscriptionId} AND tenant_id = ${tenantId}`
  })
  const subscriptionById = (subscriptionId: string, tenantId: string) => subscriptionRow({ subscriptionId, tenantId })

  const subscriptionPage = Rows.findAll({
    Request: Schema.Struct({ tenantId: Schema.String, after: Schema.String, limit: Schema.Number }),
    Result: SubscriptionRow,
    execute: ({ tenantId, after, limit }) => sql`
      SELECT ${columns} FROM subscriptions
      WHERE tenant_id = ${tenantId} AND subscription_id > ${after}
      ORDER BY subscription_id
      LIMIT ${limit}`
  })
  /** A tenant's subscriptions in id (creation) order after `after`, at most `limit`. */
  const listSubscriptions = (tenantId: string, after: string, limit: number) => subscriptionPage({ tenantId, after, limit })

  const deleteSubscription = (subscriptionId: string, tenantId: string) =>
    sql`DELETE FROM subscriptions WHERE subscription_id = ${subscriptionId} AND tenant_id = ${tenantId} RETURNING subscription_id`.pipe(
      Effect.map((rows) => rows.length > 0)
    )

  /** A disabled subscription becomes active, due at once, its failure record cleared; an active one is unchanged. */
  const resumed = Rows.findOneOption({
    Request: TenantSubscription,
    Result: SubscriptionRow,
    execute: ({ subscriptionId, tenantId }) => sql`
      UPDATE subscriptions
      SET status = 'active', disabled_reason = NULL, attempts = 0, failing_since = NULL, retry_at = NULL, held_step = NULL, next_attempt_at = now(),
        lease_token = NULL, lease_until = NULL
      WHERE subscription_id = ${subscriptionId} AND tenant_id = ${tenantId} AND status = 'disabled'
      RETURNING ${columns}`
  })
  const resumeSubscription = (subscriptionId: string, tenantId: string) => resumed({ subscriptionId, tenantId })

  const rotated = Rows.findOneOption({
    Request: Schema.Struct({ subscriptionId: Schema.String, tenantId: Schema.String, secret: Schema.String, previousUntil: Schema.Date }),
    Result: SubscriptionRow,
    execute: ({ subscriptionId, tenantId, secret, previousUntil }) => sql`
      UPDATE subscriptions
      SET previous_secret = secret, previous_secret_until = ${previousUntil}, secret = ${secret}
      WHERE subscription_id = ${subscriptionId} AND tenant_id = ${tenantId} AND secret IS NOT NULL
      RETURNING ${columns}`
  })
  /** A webhook subscription's new secret; the one it replaces keeps signing until `previousUntil`. */
  const rotateSecret = (subscriptionId: string, tenantId: string, secret: string, previousUntil: Date) =>
    rotated({ subscriptionId, tenantId, secret, previousUntil })

  /**
   * Inside the append's transaction (the outbox write): every webhook subscription of the chain now owes
   * the receiver everything through `sequence`. It commits with the event or not at all.
   */
  const owe = (publicId: PublicId, sequence: number) =>
    sql`
      UPDATE subscriptions SET pending_through = ${sequence}
      WHERE public_id = ${publicId} AND webhook_url IS NOT NULL AND pending_through < ${sequence}`.pipe(Effect.asVoid)

  /**
   * Claim up to `limit` subscriptions with something to send, due now and not leased (or whose lease ran
   * out: its instance died), soonest first. Rows another instance is claiming are skipped, not waited for;
   * the lease then keeps every other instance off each row until the attempt is acknowledged or failed.
   */
  const claimed = Rows.findAll({
    Request: Schema.Struct({ limit: Schema.Number, token: Schema.String, leaseMs: Schema.Number }),
    Result: ClaimedRow,
    execute: ({ limit, token, leaseMs }) => sql`
      UPDATE subscriptions s SET lease_token = ${token}, lease_until = now() + make_interval(secs => ${leaseMs / 1000})
      FROM (
        SELECT subscription_id FROM subscriptions
        WHERE webhook_url IS NOT NULL AND status = 'active' AND pending_through > delivered_through
          AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
        ORDER BY next_attempt_at
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      ) due
      WHERE s.subscription_id = due.subscription_id
      RETURNING s.subscription_id, s.public_id, s.webhook_url, ${signing}, s.pending_through, s.delivered_through, s.attempts,
        s.webhook_origin, s.held_step`
  })
  const claim = (limit: number, token: string, leaseMs: number) => claimed({ limit, token, leaseMs })

  /**
   * `sequence` was acknowledged. With `keepLease` the lease is kept (and extended) while more is owed, so the
   * worker goes on with the next event without a new claim; without it (the turn is over) the lease is given
   * back and the row is due now, behind every row due earlier (claims take the soonest `next_attempt_at`
   * first). None when the lease was lost (the row was deleted, or its lease ran out and another instance
   * has it: that instance sends the event again, at least once). Answers the signing secrets as they are
   * now, for the next attempt.
   *
   * With `releaseOrigin` (the delivered row was held back or was a probe, or had failed itself): the
   * receiver answers again, so in the same statement every subscription held back at that origin is due
   * now, or when its own backoff ends if that is later (`retry_at`: one failing alone keeps its backoff).
   */
  const acknowledged = Rows.findOneOption({
    Request: Schema.Struct({
      subscriptionId: Schema.String,
      token: Schema.String,
      sequence: Schema.Number,
      leaseMs: Schema.Number,
      releaseOrigin: Schema.NullOr(Schema.String),
      keepLease: Schema.Boolean
    }),
    Result: AckRow,
    execute: ({ subscriptionId, token, sequence, leaseMs, releaseOrigin, keepLease }) => {
      const acked = sql`
        UPDATE subscriptions
        SET delivered_through = ${sequence}, attempts = 0, failing_since = NULL, last_attempt_at = now(), last_error = NULL,
          next_attempt_at = now(), retry_at = NULL, held_step = NULL,
          lease_token = CASE WHEN ${keepLease} AND pending_through > ${sequence} THEN lease_token END,
          lease_until = CASE WHEN ${keepLease} AND pending_through > ${sequence} THEN now() + make_interval(secs => ${leaseMs / 1000}) END
        WHERE subscription_id = ${subscriptionId} AND lease_token = ${token} AND delivered_through < ${sequence}
        RETURNING pending_through, 0 AS released, ${signing}`
      return releaseOrigin === null
        ? acked
        : sql`
        WITH acked AS (${acked}), released AS (
          UPDATE subscriptions SET next_attempt_at = greatest(now(), coalesce(retry_at, now())), held_step = NULL
          WHERE webhook_origin = ${releaseOrigin} AND webhook_url IS NOT NULL AND status = 'active'
            AND pending_through > delivered_through AND held_step IS NOT NULL AND lease_token IS NULL
            AND subscription_id <> ${subscriptionId} AND EXISTS (SELECT 1 FROM acked)
          RETURNING 1
        )
        SELECT pending_through, (SELECT count(*) FROM released)::int AS released, ${signing} FROM acked`
    }
  })
  const acknowledge = (subscriptionId: string, token: string, sequence: number, leaseMs: number, releaseOrigin: string | null, keepLease: boolean) =>
    acknowledged({ subscriptionId, token, sequence, leaseMs, releaseOrigin, keepLease })

  /**
   * A failed attempt, in one statement: the lease is given back, the same event is due again after the
   * subscription's own backoff (`retryMs`, kept in `retry_at`), and one failing for `maxFailureSeconds`
   * becomes disabled. And, unless it became disabled, its group (every subscription of the same origin or of the
   * same exact URL, as `scope` says; nobody else for "none") is held back behind one probe:
   *
   * - The group's backoff step: one more than the step of the hold this row was released from or was the
   *   probe of (`held_step`), else the step the group is held at now, else 1. So the probes of an outage
   *   back off (1, 2, 4 … s, then every 5 minutes), and a subscription that fails alone beside healthy
   *   ones starts at step 1 each time: its failure holds the others for about a second.
   * - The probe: among the group's other rows with something owed and no lease, the one whose last attempt
   *   is oldest (never attempted first), preferring rows whose own backoff ends before the step's delay. It
   *   is due after the step's delay (or its own backoff, if later). The probe rotates: a probe that fails has
   *   just been attempted and goes to the back; so on a receiver shared by many customers, a healthy path is
   *   the next probe, gets through and releases the group (`acknowledge`).
   * - The others, this row included, that would fall due before the probe's outcome is known (its due time
   *   plus the time-out) wait until that outcome plus a margin. Held rows record no attempt.
   *
   * Alone in its group (nothing else owed there), the row just keeps its own backoff. The probe is chosen
   * inside the statement from what the statement sees, so the failures of an outage's first claim (up to
   * PV_WEBHOOK_CONCURRENCY at once, on any instances) agree on it; rows another statement has locked are
   * skipped, not waited for, so those failures do not queue behind each other. Rows already held past the
   * probe's outcome are not written again. Over the partial indexes of migrations 0008 and 0009.
   */
  const failed = Rows.findOneOption({ Request: FailedAttemptRequest, Result: FailRow, execute: (attempt) => {
    const groupColumn = sql.literal(attempt.scope === "origin" ? "webhook_origin" : "webhook_url")
    const delays = `{${attempt.stepDelaysMs.map((ms) => Math.round(ms)).join(",")}}`
    const steps = attempt.stepDelaysMs.length
    return sql`
      WITH me AS (
        SELECT subscription_id, held_step,
          CASE WHEN ${attempt.gone} THEN 'gone'
            WHEN coalesce(failing_since, now()) <= now() - make_interval(secs => ${attempt.maxFailureSeconds}) THEN 'failing'
          END AS disabling
        FROM subscriptions WHERE subscription_id = ${attempt.subscriptionId} AND lease_token = ${attempt.token}
      ), peers AS (
        SELECT subscription_id, last_attempt_at, retry_at, held_step FROM subscriptions
        WHERE ${groupColumn} = ${attempt.group} AND webhook_url IS NOT NULL AND status = 'active'
          AND pending_through > delivered_through AND lease_token IS NULL AND subscription_id <> ${attempt.subscriptionId}
          AND EXISTS (SELECT 1 FROM me WHERE disabling IS NULL) AND ${attempt.scope !== "none"}
      ), step AS (
        SELECT n, now() + make_interval(secs => (${delays}::int[])[least(n, ${steps})] / 1000.0) AS probe_by
        FROM (SELECT greatest(coalesce((SELECT held_step FROM me) + 1, 1), coalesce((SELECT max(held_step) FROM peers), 1)) AS n) s
      ), plan AS (
        SELECT step.n, p.subscription_id AS probe_id, greatest(step.probe_by, coalesce(p.retry_at, step.probe_by)) AS probe_at,
          greatest(step.probe_by, coalesce(p.retry_at, step.probe_by)) + make_interval(secs => ${attempt.outcomeMs / 1000}) AS held_until
        FROM peers p, step
        ORDER BY coalesce(p.retry_at > step.probe_by, false), p.last_attempt_at NULLS FIRST, p.subscription_id
        LIMIT 1
      ), held AS (
        UPDATE subscriptions s
        SET next_attempt_at = CASE WHEN s.subscription_id = plan.probe_id THEN plan.probe_at ELSE plan.held_until END, held_step = plan.n
        FROM plan, (
          SELECT h.subscription_id FROM subscriptions h, plan
          WHERE h.${groupColumn} = ${attempt.group} AND h.webhook_url IS NOT NULL AND h.status = 'active'
            AND h.pending_through > h.delivered_through AND h.lease_token IS NULL AND h.subscription_id <> ${attempt.subscriptionId}
            AND (h.subscription_id = plan.probe_id
              OR h.next_attempt_at < plan.held_until - make_interval(secs => ${attempt.marginMs / 1000}))
          FOR UPDATE OF h SKIP LOCKED
        ) locked
        WHERE s.subscription_id = locked.subscription_id
        RETURNING 1
      ), failed AS (
        UPDATE subscriptions s
        SET attempts = s.attempts + 1, failing_since = coalesce(s.failing_since, now()), last_attempt_at = now(),
          last_error = ${attempt.error}, retry_at = now() + make_interval(secs => ${attempt.retryMs / 1000}),
          next_attempt_at = greatest(now() + make_interval(secs => ${attempt.retryMs / 1000}), coalesce((SELECT held_until FROM plan), now())),
          held_step = (SELECT n FROM plan), lease_token = NULL, lease_until = NULL,
          status = CASE WHEN me.disabling IS NOT NULL THEN 'disabled' ELSE s.status END,
          disabled_reason = coalesce(me.disabling, s.disabled_reason)
        FROM me
        WHERE s.subscription_id = me.subscription_id AND s.lease_token = ${attempt.token}
        RETURNING s.status, s.disabled_reason, s.next_attempt_at
      )
      SELECT status, disabled_reason, next_attempt_at, (SELECT count(*) FROM held)::int AS held FROM failed`
  } })
  const recordFailure = (attempt: FailedAttempt) => failed(attempt)

  /**
   * Give back every lease `token` holds (shutdown: the attempts not finished are due again at once); the
   * determinations they are for, so other instances can be told.
   */
  const released = Rows.findAll({
    Request: Schema.String,
    Result: DueRow,
    execute: (token) => sql`
      UPDATE subscriptions SET lease_token = NULL, lease_until = NULL WHERE lease_token = ${token}
      RETURNING public_id`
  })
  const releaseLeases = (token: string) => Effect.map(released(token), (rows) => rows.map((r) => r.public_id))

  /**
   * After a database failure: give back the leases `token` holds but those of `keep` (the subscriptions its
   * attempts still work on), due again after `dueInMs` at the earliest, for any instance. The delay keeps a
   * delivery that fails the same way every time from being claimed and failed again in a tight loop.
   */
  const releaseStrayLeases = (token: string, keep: ReadonlyArray<string>, dueInMs: number) =>
    (keep.length === 0
      ? sql`
        UPDATE subscriptions
        SET lease_token = NULL, lease_until = NULL, next_attempt_at = greatest(next_attempt_at, now() + make_interval(secs => ${dueInMs / 1000}))
        WHERE lease_token = ${token}`
      : sql`
        UPDATE subscriptions
        SET lease_token = NULL, lease_until = NULL, next_attempt_at = greatest(next_attempt_at, now() + make_interval(secs => ${dueInMs / 1000}))
        WHERE lease_token = ${token} AND subscription_id NOT IN ${sql.in(keep)}`).pipe(Effect.asVoid)

  /** Milliseconds until the next subscription becomes due (a retry, or a dead instance's lease running out); null when none will. */
  const nextDueInMs = Rows.all(WaitRow, sql`
    SELECT (extract(epoch FROM min(greatest(next_attempt_at, coalesce(lease_until, next_attempt_at))) - now()) * 1000)::float8 AS wait_ms
    FROM subscriptions
    WHERE webhook_url IS NOT NULL AND status = 'active' AND pending_through > delivered_through`).pipe(
    Effect.map((rows) => rows[0]?.wait_ms ?? null)
  )

  /** Events owed to active webhook subscriptions, and subscriptions disabled: for the gauges. */
  const deliveryStats = Rows.all(DeliveryStatsRow, sql`
    SELECT coalesce(sum(pending_through - delivered_through) FILTER (WHERE status = 'active'), 0)::float8 AS pending,
      count(*) FILTER (WHERE status = 'disabled')::float8 AS disabled
    FROM subscriptions WHERE webhook_url IS NOT NULL`).pipe(Effect.map((rows) => rows[0] ?? { pending: 0, disabled: 0 }))

  /** One stored event, or none. */
  const eventAt = (publicId: PublicId, sequence: number) =>
    Effect.map(page(publicId, sequence - 1, sequence, 1), (events) => Option.fromNullishOr(events[0]))

  return {
    recordKey: Effect.fn("EventsRepo.recordKey")(recordKey),
    keys,
    lockHead: Effect.fn("EventsRepo.lockHead")(lockHead),
    head: Effect.fn("EventsRepo.head")(head),
    insertEvent: Effect.fn("EventsRepo.insertEvent")(insertEvent),
    page: Effect.fn("EventsRepo.page")(page),
    setFreshness: Effect.fn("EventsRepo.setFreshness")(setFreshness),
    dueForFreshness: Effect.fn("EventsRepo.dueForFreshness")(dueForFreshness),
    lockFreshness: Effect.fn("EventsRepo.lockFreshness")(lockFreshness),
    insertSubscription: Effect.fn("EventsRepo.insertSubscription")(insertSubscription),
    findSubscription: Effect.fn("EventsRepo.findSubscription")(findSubscription),
    subscriptionById: Effect.fn("EventsRepo.subscriptionById")(subscriptionById),
    listSubscriptions: Effect.fn("EventsRepo.listSubscriptions")(listSubscriptions),
    deleteSubscription: Effect.fn("EventsRepo.deleteSubscription")(deleteSubscription),
    resumeSubscription: Effect.fn("EventsRepo.resumeSubscription")(resumeSubscription),
    rotateSecret: Effect.fn("EventsRepo.rotateSecret")(rotateSecret),
    owe: Effect.fn("EventsRepo.owe")(owe),
    claim: Effect.fn("EventsRepo.claim")(claim),
    acknowledge: Effect.fn("EventsRepo.acknowledge")(acknowledge),
    recordFailure: Effect.fn("EventsRepo.recordFailure")(recordFailure),
    releaseLeases: Effect.fn("EventsRepo.releaseLeases")(releaseLeases),
    releaseStrayLeases: Effect.fn("EventsRepo.releaseStrayLeases")(releaseStrayLeases),
    nextDueInMs,
    deliveryStats,
    eventAt: Effect.fn("EventsRepo.eventAt")(eventAt),
    // The SQL client's own combinator, which opens its own span (sql.transaction).
    withTransaction: sql.withTransaction
  } satisfies EventsRepoShape
})

/** SQL for event chains, signing keys and subscriptions. Nothing here decides anything. */
export class EventsRepo extends Context.Service<EventsRepo, EventsRepoShape>()("pv/EventsRepo", { make }) {
  static readonly layer = Layer.effect(EventsRepo, make)
}
