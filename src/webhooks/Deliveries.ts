import { randomUUID } from "node:crypto"
import { Clock, Duration, Effect, Exit, Fiber, FiberSet, Layer, Option, Queue, Ref, Schedule } from "effect"
import { decodeTime } from "ulid"
import type { TrustEvent } from "../domain/TrustEvent.js"
import { lru } from "../domain/Memo.js"
import { ChangeFeed } from "../events/ChangeFeed.js"
import { EventsRepo, type ClaimedRow, type SigningRow } from "../events/Repo.js"
import { countWebhookAttempt, MetricsState } from "../observability/Metrics.js"
import { AppConfig } from "../platform/Config.js"
import { Ids } from "../platform/Ids.js"
import { attemptResultOf } from "./Attempts.js"
import { type AttemptRecord, WebhookAttemptsRepo } from "./AttemptsRepo.js"
import { MaxRetryDelayMs, retryDelayMs } from "./Backoff.js"
import { sendWebhook } from "./Send.js"
import { webhookHeaders } from "./Signature.js"
import { holdScope, receiverSignal } from "./Signals.js"
import { WebhookKey } from "./WebhookKey.js"

/** The body type every delivery carries. */
export const DeliveryType = "pv.trust.event.v1"

/** At most this much of a receiver's answer is read. */
export const MaxResponseBytes = 64 * 1024

/** A delivery's body: the event exactly as GET /api/v1/events returns it, and the subscription it is for. */
export const deliveryBody = (subscriptionId: string, event: TrustEvent): string =>
  JSON.stringify({ type: DeliveryType, subscription_id: subscriptionId, event })

/** The secrets that sign now: the current one, and the one it replaced while its 24 hours last. */
export const signingSecrets = (row: SigningRow, now: number): ReadonlyArray<string> =>
  row.secret === null
    ? []
    : row.previous_secret !== null && row.previous_secret_until !== null && row.previous_secret_until.getTime() > now
    ? [row.secret, row.previous_secret]
    : [row.secret]

/** One JSON line per failed attempt: what failed and when it is tried again; never a secret or a signature. */
const logFailure = (fields: Record<string, unknown>) =>
  Effect.sync(() => process.stdout.write(JSON.stringify({ time: new Date().toISOString(), level: "warn", msg: "webhook attempt failed", ...fields }) + "\n"))

/** How often the gauges' numbers are read from the outbox at most. */
const StatsIntervalMs = 5_000

/** A subscription whose delivery a database failure cut short is due again this long after its lease is given back. */
const StrayLeaseRetryMs = 1_000

/** The longest the worker sleeps with nothing due: a safety net only, every change wakes it at once. */
const IdleWaitMs = 60_000

/** Subscriptions held back behind a failing receiver's probe fall due this long after the probe's outcome at the latest. */
const ProbeOutcomeMarginMs = 1_000

/**
 * A group probe's delay at each backoff step, by the one backoff rule (webhooks/Backoff.ts) and one draw of
 * jitter: step 1, 2, … up to the first step whose delay is the cap (every later step has the cap too).
 */
const stepDelaysMs = (random: number): ReadonlyArray<number> => {
  const delays: Array<number> = []
  for (let step = 1; delays.at(-1) !== MaxRetryDelayMs && step <= 32; step++) delays.push(retryDelayMs(step, random))
  return delays
}

/** Events read for delivery that are kept (events never change once appended). */
const EventCacheSize = 256

/** Origins, and URLs, whose latest delivery time is kept (the least recently used is forgotten first). */
const AnsweredSize = 4_096

/**
 * The webhook delivery worker of one instance. The outbox is the subscriptions table (migration 0006):
 * the event append raises `pending_through` in its own transaction, and here each instance claims due
 * subscriptions with `FOR UPDATE SKIP LOCKED` and a lease, sends the next owed event, and on a 2xx moves
 * `delivered_through` on (keeping the lease while more is owed, for one bounded turn: see `deliver`), or on a
 * failure schedules the retry
 * (webhooks/Backoff.ts) and gives the lease back. So each subscription has at most one attempt in flight
 * across all instances, in sequence order, and a dead instance's work is taken over when its lease runs out.
 *
 * It wakes on the change feed (this instance's commits at once; other instances' by LISTEN/NOTIFY on
 * PostgreSQL), when an attempt ends, and when the soonest retry or lease falls due: never by polling at a
 * fixed period. At most PV_WEBHOOK_CONCURRENCY attempts run at once, each bounded by its 10 s time-out, so
 * a slow, hanging or failing receiver holds one slot and delays no other subscription. On stop it claims
 * nothing more, lets attempts in flight end within the grace period, then interrupts the rest and gives
 * their leases back (due again at once, for any instance, woken by a notice on the change feed).
 *
 * Per-receiver probing: a receiver is an origin (scheme, host, port), and subscriptions that share one
 * share its outage. A failure that is the receiver's (no connection, reset, TLS, time-out, 5xx, 429;
 * webhooks/Send.ts says which) holds back the others owing that origin behind one probe, in the statement
 * that records the failure; any other failure (another 4xx, a redirect, a refused address) only those owing
 * the same exact URL. What got through while the attempt was under way narrows that (`holdScope`, but for 429
 * and 503): a delivery this instance got through to the same URL since the attempt began means its failure holds
 * back nobody else, one to another path of the origin that a receiver's failure holds back only its URL's. The
 * probe rotates among the held subscriptions and backs off per group (1, 2, 4 … s, then every 5 minutes), so a
 * dead receiver costs one attempt per step, not one per subscription, and on a receiver shared by many customers
 * a healthy path is the next probe. The delivery that gets through again
 * (a probe, or any held or failing subscription) makes every one held at its origin due at once, in the
 * statement that acknowledges it; one whose own backoff runs longer (it failed itself) waits for that. The
 * state lives in the subscriptions' rows (`next_attempt_at`, `retry_at`, `held_step`), so every instance
 * honours it and nothing is lost when an instance dies: a hold simply runs out. Held-back subscriptions
 * record no attempt (docs/API.md §10.5).
 *
 * A database outage pauses it; it resumes alone, and gives back the leases the outage left with no attempt
 * working on them (a delivery cut short, a claim whose answer was lost) as soon as the database answers,
 * due a second later, rather than when they run out.
 */
const DeliveriesWorker = Layer.effectDiscard(Effect.gen(function*() {
  const repo = yield* EventsRepo
  const feed = yield* ChangeFeed
  const config = yield* AppConfig
  const webhookKey = yield* WebhookKey
  const deliveryState = (yield* MetricsState).delivery
  const ids = yield* Ids
  const attemptsRepo = yield* WebhookAttemptsRepo
  const token = randomUUID()
  const leaseMs = config.webhookTimeoutMs + config.webhookLeaseMarginMs
  const concurrency = config.webhookConcurrency
  const wake = yield* Queue.sliding<void>(1)
  const signal = () => Queue.offerUnsafe(wake, undefined)
  /** The attempts in flight, one fiber each: their number is the slots in use, and stopping joins them. */
  const attempts = yield* FiberSet.make<void>()
  const inFlight = FiberSet.size(attempts)
  /** The subscriptions this instance's attempts are working on: their leases are in use. */
  const working = new Set<string>()
  /** A database failure may have left leases of this token that nothing works on. */
  const strayLeases = yield* Ref.make(false)
  /** Set first on stop: a turn in flight sends nothing more. */
  const stopping = yield* Ref.make(false)
  const statsReadAt = yield* Ref.make(0)
  /** The last claim filled every free slot (or none was free): due rows may be waiting for the next slot. */
  const behind = yield* Ref.make(false)
  /** When the sleeping claim loop wakes by itself; +Infinity while it is not asleep. */
  const wakeAt = yield* Ref.make(Number.POSITIVE_INFINITY)

  /** When this instance last got a delivery through to each origin and URL: whom a failure holds back (`holdScope`). */
  const originAnswers = lru<number>(AnsweredSize)
  const urlAnswers = lru<number>(AnsweredSize)

  // A change fanned out to many subscriptions, or retried, is read from the database once.
  const events = new Map<string, TrustEvent>()
  const eventAt = (publicId: ClaimedRow["public_id"], sequence: number) => {
    const key = `${publicId}#${sequence}`
    const cached = events.get(key)
    if (cached !== undefined) return Effect.succeed(Option.some(cached))
    return Effect.tap(repo.eventAt(publicId, sequence), (found) =>
      Effect.sync(() => {
        if (Option.isNone(found)) return
        if (events.size >= EventCacheSize) events.delete(events.keys().next().value!)
        events.set(key, found.value)
      }))
  }

  /** Database writes after an attempt are retried briefly: a delivered event not recorded would be sent again. */
  const persist = Effect.retry({ schedule: Schedule.exponential(Duration.millis(200)), times: 5 })

  /**
   * An attempt's outcome, then its record (webhooks/AttemptsRepo.ts), one statement each: a transaction
   * around the two cost every delivery two more round trips. The record's answer is the position to go on
   * from when a redelivery was asked for while the attempt was in flight; a crash between the two loses the
   * record and leaves that redelivery to the prune loop's repair (webhooks/AttemptsPruner.ts). Each is retried
   * on its own: the outcome's statement again after it took effect would read as a lost lease.
   */
  const withAttempt = <A, E>(outcome: Effect.Effect<A, E>, attempt: AttemptRecord) =>
    Effect.zip(persist(outcome), persist(attemptsRepo.recordAttempt(attempt)))

  /**
   * One turn: send the events `claimed` is owed, one at a time, for as long as each is acknowledged, but at
   * most PV_WEBHOOK_TURN_EVENTS of them and none started PV_WEBHOOK_TURN_MS after the turn began; then the
   * lease is given back, due at once behind every subscription due before it, so a busy subscription
   * yields its slot instead of keeping it while anything is owed. Each attempt is signed with the secrets
   * the statement before it read (the claim, then each acknowledgement), so a rotation signs the next one.
   * Its end wakes the claim loop only when that can matter: rows were left behind for want of a slot, or it
   * leaves something due before the loop would wake by itself (a retry; a turn given back; a lease left to
   * run out after an error). An acknowledged end leaves nothing due, and waking for it cost a claim and a
   * look-up per delivery.
   */
  const deliver = (claimed: ClaimedRow) =>
    // Its value: the local time at which what this attempt leaves behind falls due; null: nothing.
    Effect.gen(function*() {
      let sequence = claimed.delivered_through + 1
      let failures = claimed.attempts
      // Held back, a probe, or failing itself: its first delivery shows the receiver answers again.
      let releases = claimed.held_step !== null || claimed.attempts > 0
      let signing: SigningRow = claimed
      let delivered = 0
      const turnEndsAt = (yield* Clock.currentTimeMillis) + config.webhookTurnMs
      while (!(yield* Ref.get(stopping))) {
        const found = yield* eventAt(claimed.public_id, sequence)
        if (Option.isNone(found)) return 0
        const event = found.value
        const body = deliveryBody(claimed.subscription_id, event)
        const now = yield* Clock.currentTimeMillis
        const headers = webhookHeaders(signing.signature_scheme === "v1a" ? webhookKey : signingSecrets(signing, now), event.event_id, Math.floor(now / 1000), body)
        const attemptId = yield* ids.make("att")
        const startedNs = yield* Clock.monotonicTimeNanos
        const outcome = yield* Effect.promise((abort) =>
          sendWebhook({
            url: claimed.webhook_url,
            headers,
            body,
            timeoutMs: config.webhookTimeoutMs,
            maxResponseBytes: MaxResponseBytes,
            allowPrivate: config.webhookAllowPrivate,
            signal: abort
          })
        )
        const attempt: AttemptRecord = {
          attempt_id: attemptId,
          subscription_id: claimed.subscription_id,
          event_id: event.event_id,
          sequence,
          started_at: new Date(decodeTime(attemptId.slice(4))),
          duration_ms: Number(((yield* Clock.monotonicTimeNanos) - startedNs) / 1_000_000n),
          ...attemptResultOf(outcome),
          token,
          continues: outcome.kind === "delivered",
          leaseMs
        }
        if (outcome.kind === "delivered") {
          const ended = yield* Clock.currentTimeMillis
          originAnswers.set(claimed.webhook_origin, ended)
          urlAnswers.set(claimed.webhook_url, ended)
          countWebhookAttempt("delivered", (ended - Date.parse(event.occurred_at)) / 1000)
          delivered += 1
          const turnOver = delivered >= config.webhookTurnEvents || ended >= turnEndsAt
          // A probe that got through: the receiver answers again, so what was held back at its origin is due now.
          const [acked, redo] = yield* withAttempt(
            repo.acknowledge(claimed.subscription_id, token, sequence, leaseMs, releases ? claimed.webhook_origin : null, !turnOver),
            { ...attempt, continues: !turnOver }
          )
          releases = false
          if (Option.isSome(acked) && acked.value.released > 0) signal()
          // A redelivery asked for meanwhile: on from its first event, still holding the lease.
          if (Option.isSome(redo)) {
            sequence = redo.value + 1
            failures = 0
            continue
          }
          // Lost the lease (deleted, or taken over after it ran out), or nothing more is owed.
          if (Option.isNone(acked) || acked.value.pending_through <= sequence) return null
          // The turn is over: the lease was given back and the rest is due now, behind the others due.
          if (turnOver) return Date.now()
          signing = acked.value
          sequence += 1
          failures = 0
          continue
        }
        failures += 1
        const random = Math.random()
        // The backoff, or later if the receiver asked (429/503 Retry-After); a 410 disables the subscription.
        const { gone, retryMs } = receiverSignal(outcome, retryDelayMs(failures, random), yield* Clock.currentTimeMillis)
        const steps = stepDelaysMs(random)
        // Narrowed by what got through to the same URL or origin since this attempt began.
        const scope = holdScope(outcome, now, { origin: originAnswers.get(claimed.webhook_origin), url: urlAnswers.get(claimed.webhook_url) })
        // One statement: the failure, and the hold of its group (the origin's, the URL's, or none) behind one probe.
        const [failed] = yield* withAttempt(repo.recordFailure({
          subscriptionId: claimed.subscription_id,
          token,
          error: outcome.error,
          retryMs,
          maxFailureSeconds: config.webhookMaxFailureSeconds,
          gone,
          scope,
          group: scope === "origin" ? claimed.webhook_origin : claimed.webhook_url,
          stepDelaysMs: steps,
          outcomeMs: config.webhookTimeoutMs + ProbeOutcomeMarginMs,
          marginMs: ProbeOutcomeMarginMs
        }), attempt)
        const disabled = Option.isSome(failed) && failed.value.status === "disabled"
        countWebhookAttempt(disabled ? "disabled" : "failed")
        yield* logFailure({
          subscription_id: claimed.subscription_id,
          event_id: event.event_id,
          sequence,
          status: outcome.status ?? null,
          error: outcome.error,
          scope,
          next_attempt_at: disabled || Option.isNone(failed) ? null : failed.value.next_attempt_at.toISOString(),
          held_back: Option.isSome(failed) ? failed.value.held : 0,
          disabled,
          ...(disabled ? { disabled_reason: failed.value.disabled_reason } : {})
        })
        // What it leaves due soonest: the probe it chose, or itself.
        return disabled || Option.isNone(failed) ? null : Date.now() + Math.min(retryMs, steps[0]!)
      }
      return null
    }).pipe(
      // A database failure mid-delivery: the lease is given back once the database answers (the next round),
      // and the event is sent again a second later (at least once).
      Effect.catchCause((cause) =>
        Ref.set(strayLeases, true).pipe(
          Effect.andThen(Effect.logWarning(`webhook delivery of ${claimed.subscription_id} failed; it is retried`, cause)),
          Effect.as(0)
        )
      ),
      // Interrupted (stopping): due at once, like a failure.
      Effect.onExit((exit) => attemptEnded(claimed.subscription_id, Exit.isSuccess(exit) ? exit.value : 0))
    )

  /** An attempt's end wakes the claim loop when that can matter (see `deliver`). */
  const attemptEnded = (subscriptionId: string, dueAt: number | null) =>
    Effect.gen(function*() {
      working.delete(subscriptionId)
      if ((yield* Ref.get(strayLeases)) || (yield* Ref.get(behind)) || (dueAt !== null && dueAt < (yield* Ref.get(wakeAt)))) signal()
    })

  const refreshStats = Effect.gen(function*() {
    const now = Date.now()
    if (now - (yield* Ref.get(statsReadAt)) < StatsIntervalMs) return
    yield* Ref.set(statsReadAt, now)
    const stats = yield* repo.deliveryStats
    deliveryState.pending = stats.pending
    deliveryState.disabled = stats.disabled
  })

  /** Claim what is due into the free slots; then sleep until woken or until the soonest retry or lease falls due. */
  const round = Effect.gen(function*() {
    yield* Ref.set(wakeAt, Number.POSITIVE_INFINITY)
    if (yield* Ref.get(strayLeases)) {
      // Otherwise each would hold its subscription until its lease (PV_WEBHOOK_TIMEOUT_MS + PV_WEBHOOK_LEASE_MARGIN_MS) ran out.
      yield* repo.releaseStrayLeases(token, [...working], StrayLeaseRetryMs)
      yield* Ref.set(strayLeases, false)
    }
    const free = concurrency - (yield* inFlight)
    if (free > 0) {
      // Whole even when stopping interrupts the loop: a claim's leases are then given back, not left to run out.
      const claimed = yield* Effect.uninterruptible(repo.claim(free, token, leaseMs))
      for (const row of claimed) {
        working.add(row.subscription_id)
        yield* FiberSet.run(attempts, deliver(row))
      }
      // A full claim may have left more behind: claim again when a slot frees (an ending attempt wakes us),
      // at once if one freed while the claim ran (an acknowledged attempt does not wake us unless behind).
      if (claimed.length === free) {
        yield* Ref.set(behind, true)
        return (yield* inFlight) < concurrency ? undefined : yield* Queue.take(wake)
      }
      yield* Ref.set(behind, false)
    } else {
      yield* Ref.set(behind, true)
    }
    yield* refreshStats
    const dueIn = (yield* inFlight) >= concurrency ? null : yield* repo.nextDueInMs
    // Something due that was not claimable (another instance's claim in progress): look again shortly.
    const waitMs = dueIn === null ? IdleWaitMs : Math.min(IdleWaitMs, Math.max(100, Math.ceil(dueIn)))
    yield* Ref.set(wakeAt, Date.now() + waitMs)
    yield* Effect.raceFirst(Queue.take(wake), Effect.sleep(Duration.millis(waitMs)))
  })

  const worker = Effect.forever(round.pipe(
    Effect.catchCause((cause) =>
      Effect.andThen(
        // A claim may have committed with its answer lost: those leases are ours and nothing works on them.
        Ref.set(strayLeases, true),
        Effect.andThen(Effect.logWarning("webhook deliveries paused: the database did not answer; retrying", cause), Effect.sleep(Duration.seconds(1)))
      )
    )
  ))

  const changes = yield* feed.watch()
  yield* Effect.forkScoped(Effect.forever(Effect.andThen(changes.next, Effect.sync(signal))))
  const claimLoop = yield* Effect.forkScoped(worker)

  // On stop: the claim loop ends (it claims nothing more; leases it claimed without starting are given back
  // below), the turns in flight send nothing after their current attempt, and those attempts are joined
  // for the grace period; the rest are interrupted. Added after the FiberSet and the loop, so it runs first.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      yield* Ref.set(stopping, true)
      yield* Fiber.interrupt(claimLoop)
      yield* FiberSet.awaitEmpty(attempts).pipe(Effect.timeoutOption(Duration.millis(Math.max(0, config.shutdownGraceMs - 500))))
      yield* FiberSet.clear(attempts)
      yield* Effect.ignore(Effect.gen(function*() {
        const released = yield* repo.releaseLeases(token)
        // Other instances sleep until the leases would have run out: wake them for these now.
        for (const publicId of new Set(released)) yield* feed.notify(publicId)
      }))
    })
  )
}))

export const DeliveriesLive = DeliveriesWorker.pipe(Layer.provide([EventsRepo.layer, WebhookAttemptsRepo.layer, Ids.layer]))
