import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { PublicId } from "../domain/PublicId.js"
import * as Rows from "../platform/Rows.js"
import { AttemptOutcomeKind } from "./Attempts.js"

type Sql<A> = Effect.Effect<A, SqlError>

/** One attempt as stored (migration 0010). */
const AttemptRow = Schema.Struct({
  attempt_id: Schema.String,
  event_id: Schema.String,
  sequence: Schema.Int,
  started_at: Schema.Date,
  duration_ms: Schema.Int,
  status: Schema.NullOr(Schema.Int),
  outcome: AttemptOutcomeKind,
  error: Schema.NullOr(Schema.String)
})
export type AttemptRow = typeof AttemptRow.Type

/** An attempt's outcome, recorded by the delivery worker that made it (see `recordAttempt`). */
export interface AttemptRecord extends AttemptRow {
  readonly subscription_id: string
  /** The worker's lease token. */
  readonly token: string
  /** The attempt was delivered: a redelivery applied now keeps (or takes back) the lease, for the worker to go on from it. */
  readonly continues: boolean
  readonly leaseMs: number
}
const AttemptRecordRequest = Schema.Struct({
  ...AttemptRow.fields,
  subscription_id: Schema.String,
  token: Schema.String,
  continues: Schema.Boolean,
  leaseMs: Schema.Number
})

const RedoRow = Schema.Struct({ delivered_through: Schema.Int })
const RedeliveredRow = Schema.Struct({ public_id: PublicId })
const PrunedRow = Schema.Struct({ pruned: Schema.Number })
const LockRow = Schema.Struct({ locked: Schema.Boolean })

/** The prune's transaction-scoped advisory lock: "pvatt" in ASCII. */
const PruneLockKey = 0x7076617474

export interface WebhookAttemptsRepoShape {
  /**
   * Right after the statement that records an attempt's outcome (acknowledge or recordFailure): the
   * attempt's row, and a redelivery asked for while it was in flight applied. Some(delivered_through) when the
   * worker goes on from there (`continues`, the lease is its own); none otherwise.
   */
  readonly recordAttempt: (attempt: AttemptRecord) => Sql<Option.Option<number>>
  /** A subscription's attempts, newest first, with an id below `before` (all when null), at most `limit`. */
  readonly page: (subscriptionId: string, before: string | null, limit: number) => Sql<Array<AttemptRow>>
  /** Lower a webhook subscription's acknowledged position to `fromSequence - 1` (see `redeliver` below); none when there is no such subscription. */
  readonly redeliver: (subscriptionId: string, tenantId: string, fromSequence: number) => Sql<Option.Option<PublicId>>
  /**
   * Redeliveries left waiting for an outcome that will never be recorded (the worker died between its
   * outcome's statement and the record's): applied now where no attempt holds the row; their determinations.
   */
  readonly applyStranded: Sql<Array<PublicId>>
  /** Delete every attempt but the newest `keep` of each subscription (one instance at a time); how many went. */
  readonly prune: (keep: number) => Sql<number>
}

const make = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient

  /**
   * The attempt's row only while its subscription exists (one deleted meanwhile takes its attempts with it),
   * once (a retry after a commit whose answer was lost writes nothing again).
   * A pending `redeliver_from` is applied when the row is this worker's or nobody's (right after the outcome's
   * own statement, which gave the lease back or kept it; nothing owed is claimable meanwhile, and a failure's
   * retry is not due yet): `delivered_through` goes down to
   * `redeliver_from - 1`, and a worker that goes on keeps the lease, or takes it back when the acknowledgement
   * gave it up, as long as something is owed.
   */
  const recorded = Rows.findAll({
    Request: AttemptRecordRequest,
    Result: RedoRow,
    execute: (a) => sql`
      WITH recorded AS (
        INSERT INTO webhook_attempts (attempt_id, subscription_id, event_id, sequence, started_at, duration_ms, status, outcome, error)
        SELECT ${a.attempt_id}::text, subscription_id, ${a.event_id}::text, ${a.sequence}::int, ${a.started_at}::timestamptz,
          ${a.duration_ms}::int, ${a.status}::int, ${a.outcome}::text, ${a.error}::text
        FROM subscriptions WHERE subscription_id = ${a.subscription_id}
        ON CONFLICT (attempt_id) DO NOTHING
        RETURNING 1
      ), redo AS (
        UPDATE subscriptions
        SET delivered_through = least(delivered_through, redeliver_from - 1), redeliver_from = NULL,
          lease_token = CASE WHEN ${a.continues}::boolean AND pending_through > least(delivered_through, redeliver_from - 1)
            THEN ${a.token} ELSE lease_token END,
          lease_until = CASE WHEN ${a.continues}::boolean AND pending_through > least(delivered_through, redeliver_from - 1)
            THEN now() + make_interval(secs => ${a.leaseMs / 1000}) ELSE lease_until END
        WHERE subscription_id = ${a.subscription_id} AND redeliver_from IS NOT NULL
          AND (lease_token = ${a.token} OR lease_token IS NULL)
        RETURNING delivered_through, lease_token, pending_through
      )
      SELECT delivered_through FROM redo
      WHERE ${a.continues}::boolean AND lease_token = ${a.token} AND pending_through > delivered_through`
  })
  const recordAttempt = (attempt: AttemptRecord) =>
    Effect.map(recorded(attempt), (rows) => Option.fromNullishOr(rows[0]?.delivered_through))

  const attemptRows = Rows.findAll({
    Request: Schema.Struct({ subscriptionId: Schema.String, before: Schema.NullOr(Schema.String), limit: Schema.Number }),
    Result: AttemptRow,
    execute: ({ subscriptionId, before, limit }) => sql`
      SELECT attempt_id, event_id, sequence, started_at, duration_ms, status, outcome, error
      FROM webhook_attempts
      WHERE subscription_id = ${subscriptionId} AND (${before}::text IS NULL OR attempt_id < ${before})
      ORDER BY attempt_id DESC
      LIMIT ${limit}`
  })
  const page = (subscriptionId: string, before: string | null, limit: number) => attemptRows({ subscriptionId, before, limit })

  /**
   * One statement. A disabled subscription becomes active, due at once, its failure record cleared (as
   * resume). With no attempt in flight (no lease, or one that ran out: its holder is gone, and clearing it
   * keeps a late acknowledgement from moving the position up again), `delivered_through` goes down to
   * `fromSequence - 1` now; otherwise `redeliver_from` waits for the attempt's outcome (`recordAttempt`).
   * Never raised: events not yet acknowledged stay owed.
   */
  const redelivered = Rows.findOneOption({
    Request: Schema.Struct({ subscriptionId: Schema.String, tenantId: Schema.String, fromSequence: Schema.Number }),
    Result: RedeliveredRow,
    execute: ({ subscriptionId, tenantId, fromSequence }) => {
      const free = sql.literal("(lease_token IS NULL OR lease_until < now())")
      const disabled = sql.literal("status = 'disabled'")
      return sql`
        UPDATE subscriptions
        SET status = 'active',
          attempts = CASE WHEN ${disabled} THEN 0 ELSE attempts END,
          failing_since = CASE WHEN ${disabled} THEN NULL ELSE failing_since END,
          retry_at = CASE WHEN ${disabled} THEN NULL ELSE retry_at END,
          held_step = CASE WHEN ${disabled} THEN NULL ELSE held_step END,
          next_attempt_at = CASE WHEN ${disabled} THEN now() ELSE next_attempt_at END,
          delivered_through = CASE WHEN ${free} THEN least(delivered_through, ${fromSequence - 1}) ELSE delivered_through END,
          redeliver_from = CASE WHEN ${free} THEN NULL ELSE least(coalesce(redeliver_from, ${fromSequence}), ${fromSequence}) END,
          lease_token = CASE WHEN ${free} THEN NULL ELSE lease_token END,
          lease_until = CASE WHEN ${free} THEN NULL ELSE lease_until END
        WHERE subscription_id = ${subscriptionId} AND tenant_id = ${tenantId} AND webhook_url IS NOT NULL
        RETURNING public_id`
    }
  })
  const redeliver = (subscriptionId: string, tenantId: string, fromSequence: number) =>
    Effect.map(redelivered({ subscriptionId, tenantId, fromSequence }), Option.map((row) => row.public_id))

  const stranded = Rows.all(RedeliveredRow, sql`
    UPDATE subscriptions
    SET delivered_through = least(delivered_through, redeliver_from - 1), redeliver_from = NULL, lease_token = NULL, lease_until = NULL
    WHERE redeliver_from IS NOT NULL AND (lease_token IS NULL OR lease_until < now())
    RETURNING public_id`)
  const applyStranded = Effect.map(stranded, (rows) => rows.map((row) => row.public_id))

  /** Per webhook subscription, the `keep`-th newest attempt is found on the index; everything older goes. */
  const pruned = Rows.findAll({
    Request: Schema.Number,
    Result: PrunedRow,
    execute: (keep) => sql`
      WITH gone AS (
        DELETE FROM webhook_attempts a
        USING (
          SELECT s.subscription_id,
            (SELECT w.attempt_id FROM webhook_attempts w WHERE w.subscription_id = s.subscription_id
              ORDER BY w.attempt_id DESC OFFSET ${keep - 1} LIMIT 1) AS oldest_kept
          FROM subscriptions s WHERE s.webhook_url IS NOT NULL
        ) k
        WHERE a.subscription_id = k.subscription_id AND a.attempt_id < k.oldest_kept
        RETURNING 1
      )
      SELECT count(*)::float8 AS pruned FROM gone`
  })
  const tryLock = Rows.all(LockRow, sql`SELECT pg_try_advisory_xact_lock(${BigInt(PruneLockKey)}) AS locked`)
  /** One instance at a time (the others skip the round): concurrent deletes of the same rows could deadlock. */
  const prune = (keep: number) =>
    sql.withTransaction(Effect.flatMap(tryLock, (rows) =>
      rows[0]?.locked === true ? Effect.map(pruned(keep), (deleted) => deleted[0]?.pruned ?? 0) : Effect.succeed(0)))

  return {
    recordAttempt: Effect.fn("WebhookAttemptsRepo.recordAttempt")(recordAttempt),
    page: Effect.fn("WebhookAttemptsRepo.page")(page),
    redeliver: Effect.fn("WebhookAttemptsRepo.redeliver")(redeliver),
    applyStranded,
    prune: Effect.fn("WebhookAttemptsRepo.prune")(prune)
  } satisfies WebhookAttemptsRepoShape
})

/** SQL for webhook attempts (migration 0010) and redelivery. Nothing here decides anything. */
export class WebhookAttemptsRepo extends Context.Service<WebhookAttemptsRepo, WebhookAttemptsRepoShape>()("pv/WebhookAttemptsRepo", { make }) {
  static readonly layer = Layer.effect(WebhookAttemptsRepo, make)
}
