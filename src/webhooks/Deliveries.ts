import { randomUUID } from "node:crypto"
import { Clock, Duration, Effect, FiberSet, Layer, Option, Queue, Schedule } from "effect"
import type { TrustEvent } from "../domain/TrustEvent.js"
import { ChangeFeed } from "../events/ChangeFeed.js"
import { EventsRepo, type ClaimedRow } from "../events/Repo.js"
import { countWebhookAttempt, deliveryState } from "../observability/Metrics.js"
import { AppConfig } from "../platform/Config.js"
import { retryDelayMs } from "./Backoff.js"
import { sendWebhook } from "./Send.js"
import { webhookHeaders } from "./Signature.js"

/** The body type every delivery carries. */
export const DeliveryType = "pv.trust.event.v1"

/** At most this much of a receiver's answer is read. */
export const MaxResponseBytes = 64 * 1024

/** A delivery's body: the event exactly as GET /api/v1/events returns it, and the subscription it is for. */
export const deliveryBody = (subscriptionId: string, event: TrustEvent): string =>
  JSON.stringify({ type: DeliveryType, subscription_id: subscriptionId, event })

/** The secrets that sign now: the current one, and the one it replaced while its 24 hours last. */
export const signingSecrets = (row: ClaimedRow, now: number): ReadonlyArray<string> =>
  row.previous_secret !== null && row.previous_secret_until !== null && row.previous_secret_until.getTime() > now
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

/** Subscriptions held back behind a failing URL's probe fall due this long after the probe's outcome at the latest. */
const ProbeOutcomeMarginMs = 1_000

/** Events read for delivery that are kept (events never change once appended). */
const EventCacheSize = 256

/**
 * The webhook delivery worker of one instance. The outbox is the subscriptions table (migration 0006):
 * the event append raises `pending_through` in its own transaction, and here each instance claims due
 * subscriptions with `FOR UPDATE SKIP LOCKED` and a lease, sends the next owed event, and on a 2xx moves
 * `delivered_through` on (keeping the lease while more is owed), or on a failure schedules the retry
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
 * Per-endpoint probing: subscriptions that share a webhook URL (exactly) share its outage. A failed attempt
 * holds back the others owing that URL until its own retry's outcome is known (retry delay + time-out +
 * 1 s), in one statement; so a dead URL costs one attempt per backoff step, not one per subscription. The attempt
 * that gets through again makes them all due at once. The state lives in the subscriptions' rows
 * (`next_attempt_at`), so every instance honours it and nothing is lost when an instance dies: a hold
 * simply runs out. Held-back subscriptions record no attempt (docs/API.md §10.5).
 *
 * A database outage pauses it; it resumes alone, and gives back the leases the outage left with no attempt
 * working on them (a delivery cut short, a claim whose answer was lost) as soon as the database answers,
 * due a second later, rather than when they run out.
 */
const DeliveriesWorker = Layer.effectDiscard(Effect.gen(function*() {
  const repo = yield* EventsRepo
  const feed = yield* ChangeFeed
  const config = yield* AppConfig
  const token = randomUUID()
  const leaseMs = config.webhookTimeoutMs + 10_000
  const concurrency = config.webhookConcurrency
  const wake = yield* Queue.sliding<void>(1)
  const signal = () => Queue.offerUnsafe(wake, undefined)
  const attempts = yield* FiberSet.make<void>()
  let inFlight = 0
  /** The subscriptions this instance's attempts are working on: their leases are in use. */
  const working = new Set<string>()
  /** A database failure may have left leases of this token that nothing works on. */
  let strayLeases = false
  let stopping = false
  let statsReadAt = 0
  /** The last claim filled every free slot (or none was free): due rows may be waiting for the next slot. */
  let behind = false
  /** When the sleeping claim loop wakes by itself; +Infinity while it is not asleep. */
  let wakeAt = Number.POSITIVE_INFINITY

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
   * Send the events `claimed` is owed, one at a time, for as long as each is acknowledged. Its end wakes
   * the claim loop only when that can matter: rows were left behind for want of a slot, or it leaves
   * something due before the loop would wake by itself (a retry; a lease left to run out after an error).
   * An acknowledged end leaves nothing due, and waking for it cost a claim and a look-up per delivery.
   */
  const deliver = (claimed: ClaimedRow) => {
    // The local time at which what this attempt leaves behind falls due; null: nothing.
    let leavesDueAt: number | null = 0
    return Effect.gen(function*() {
      let sequence = claimed.delivered_through + 1
      let failures = claimed.attempts
      while (!stopping) {
        const found = yield* eventAt(claimed.public_id, sequence)
        if (Option.isNone(found)) return 0
        const event = found.value
        const body = deliveryBody(claimed.subscription_id, event)
        const now = yield* Clock.currentTimeMillis
        const headers = webhookHeaders(signingSecrets(claimed, now), event.event_id, Math.floor(now / 1000), body)
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
        if (outcome.kind === "delivered") {
          countWebhookAttempt("delivered", ((yield* Clock.currentTimeMillis) - Date.parse(event.occurred_at)) / 1000)
          const owed = yield* persist(repo.acknowledge(claimed.subscription_id, token, sequence, leaseMs))
          // A probe that got through: the URL answers again, so what was held back for it is due now.
          if (failures > 0 && (yield* persist(repo.releaseHeld(claimed.webhook_url))) > 0) signal()
          // Lost the lease (deleted, or taken over after it ran out), or nothing more is owed.
          if (Option.isNone(owed) || owed.value <= sequence) return null
          sequence += 1
          failures = 0
          continue
        }
        failures += 1
        const retryMs = retryDelayMs(failures, Math.random())
        const failed = yield* persist(repo.recordFailure(claimed.subscription_id, token, outcome.error, retryMs, config.webhookMaxFailureSeconds))
        const disabled = Option.isSome(failed) && failed.value.status === "disabled"
        // The others owing this URL wait for the outcome of its next attempt (one probe per backoff step).
        if (Option.isSome(failed) && !disabled) {
          yield* persist(repo.holdBack(claimed.webhook_url, retryMs, retryMs + config.webhookTimeoutMs + ProbeOutcomeMarginMs))
        }
        countWebhookAttempt(disabled ? "disabled" : "failed")
        yield* logFailure({
          subscription_id: claimed.subscription_id,
          event_id: event.event_id,
          sequence,
          status: outcome.status ?? null,
          error: outcome.error,
          next_attempt_at: disabled || Option.isNone(failed) ? null : failed.value.next_attempt_at.toISOString(),
          disabled
        })
        return disabled || Option.isNone(failed) ? null : Date.now() + retryMs
      }
      return null
    }).pipe(
      Effect.tap((dueAt) => Effect.sync(() => (leavesDueAt = dueAt))),
      // A database failure mid-delivery: the lease is given back once the database answers (the next round),
      // and the event is sent again a second later (at least once).
      Effect.catchCause((cause) =>
        Effect.andThen(
          Effect.sync(() => (strayLeases = true)),
          Effect.logWarning(`webhook delivery of ${claimed.subscription_id} failed; it is retried`, cause)
        )
      ),
      Effect.ensuring(Effect.sync(() => {
        inFlight -= 1
        working.delete(claimed.subscription_id)
        if (strayLeases || behind || (leavesDueAt !== null && leavesDueAt < wakeAt)) signal()
      }))
    )
  }

  const refreshStats = Effect.gen(function*() {
    const now = Date.now()
    if (now - statsReadAt < StatsIntervalMs) return
    statsReadAt = now
    const stats = yield* repo.deliveryStats
    deliveryState.pending = stats.pending
    deliveryState.disabled = stats.disabled
  })

  /** Claim what is due into the free slots; then sleep until woken or until the soonest retry or lease falls due. */
  const round = Effect.gen(function*() {
    wakeAt = Number.POSITIVE_INFINITY
    // Stopping: claim nothing more (the finalizer below waits for what is in flight).
    if (stopping) return yield* Effect.never
    if (strayLeases) {
      // Otherwise each would hold its subscription until PV_WEBHOOK_TIMEOUT_MS + 10 s after its last use.
      yield* repo.releaseStrayLeases(token, [...working], StrayLeaseRetryMs)
      strayLeases = false
    }
    const free = concurrency - inFlight
    if (free > 0) {
      const claimed = yield* repo.claim(free, token, leaseMs)
      for (const row of claimed) {
        inFlight += 1
        working.add(row.subscription_id)
        yield* FiberSet.run(attempts, deliver(row))
      }
      // A full claim may have left more behind: claim again when a slot frees (an ending attempt wakes us),
      // at once if one freed while the claim ran (an acknowledged attempt does not wake us unless behind).
      if (claimed.length === free) {
        behind = true
        return inFlight < concurrency ? undefined : yield* Queue.take(wake)
      }
      behind = false
    } else {
      behind = true
    }
    yield* refreshStats
    const dueIn = inFlight >= concurrency ? null : yield* repo.nextDueInMs
    // Something due that was not claimable (another instance's claim in progress): look again shortly.
    const waitMs = dueIn === null ? IdleWaitMs : Math.min(IdleWaitMs, Math.max(100, Math.ceil(dueIn)))
    wakeAt = Date.now() + waitMs
    yield* Effect.raceFirst(Queue.take(wake), Effect.sleep(Duration.millis(waitMs)))
  })

  const worker = Effect.forever(round.pipe(
    Effect.catchCause((cause) =>
      Effect.andThen(
        // A claim may have committed with its answer lost: those leases are ours and nothing works on them.
        Effect.sync(() => (strayLeases = true)),
        Effect.andThen(Effect.logWarning("webhook deliveries paused: the database did not answer; retrying", cause), Effect.sleep(Duration.seconds(1)))
      )
    )
  ))

  const changes = yield* feed.watch()
  yield* Effect.forkScoped(Effect.forever(Effect.andThen(changes.next, Effect.sync(signal))))
  yield* Effect.forkScoped(worker)

  // Added after the FiberSet, so it runs before the set interrupts what is left.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      stopping = true
      const deadline = Date.now() + Math.max(0, config.shutdownGraceMs - 500)
      while (inFlight > 0 && Date.now() < deadline) yield* Effect.sleep(Duration.millis(50))
      yield* FiberSet.clear(attempts)
      yield* Effect.ignore(Effect.gen(function*() {
        const released = yield* repo.releaseLeases(token)
        // Other instances sleep until the leases would have run out: wake them for these now.
        for (const publicId of new Set(released)) yield* feed.notify(publicId)
      }))
    })
  )
}))

export const DeliveriesLive = DeliveriesWorker.pipe(Layer.provide(EventsRepo.layer))
