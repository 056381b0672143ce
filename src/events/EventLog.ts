import { Clock, Context, Effect, Layer, Option } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { DeterminationBody } from "../domain/Determination.js"
import { freshnessAt, FreshnessStates, freshnessTimeline, type FreshnessState } from "../domain/Freshness.js"
import type { EventHead } from "../domain/MachineTrust.js"
import { DeterminationNotFound, FieldError, ValidationFailed } from "../domain/Problem.js"
import type { PublicId } from "../domain/PublicId.js"
import type { EventJwks, EventPage, EventPayload, EventType, TrustEvent } from "../domain/TrustEvent.js"
import { entryBytesOf, eventEntryOf } from "../log/Entries.js"
import { LogNudge } from "../log/LogNudge.js"
import { LogRepo } from "../log/Repo.js"
import { countEventAppended } from "../observability/Metrics.js"
import { AppConfig } from "../platform/Config.js"
import { Ids } from "../platform/Ids.js"
import { sealEvent } from "../domain/EventChain.js"
import { DefaultPageSize, MaxPageSize } from "./Paging.js"
import { EventsRepo } from "./Repo.js"
import { Signer, type SignerShape } from "./Signer.js"

export { DefaultPageSize, MaxPageSize } from "./Paging.js"

/** One stored change of a determination, as `Determinations.ingest` sees it inside its transaction. */
export interface DeterminationChange {
  readonly public_id: PublicId
  readonly determination_id: string
  readonly version: number
  readonly determination_digest: string
  /** The body of the version this one replaces; null for the first version. */
  readonly previous: DeterminationBody | null
  readonly body: DeterminationBody
  readonly changed_fields: ReadonlyArray<string>
}

/**
 * One stored change → exactly one event. A change that moves lifecycle_state is a `lifecycle.changed`
 * (its payload still lists every changed field), so the chain never records one change twice.
 */
export const changeEventOf = (
  change: DeterminationChange,
  freshness: FreshnessState
): { readonly type: EventType; readonly payload: EventPayload } => {
  const version = {
    determination_id: change.determination_id,
    version: change.version,
    determination_digest: change.determination_digest
  }
  if (change.previous === null) {
    return {
      type: "determination.recorded",
      payload: { ...version, lifecycle_state: change.body.lifecycle_state, freshness_state: freshness }
    }
  }
  if (change.previous.lifecycle_state !== change.body.lifecycle_state) {
    return {
      type: "lifecycle.changed",
      payload: {
        ...version,
        previous_lifecycle_state: change.previous.lifecycle_state,
        lifecycle_state: change.body.lifecycle_state,
        changed_fields: [...change.changed_fields],
        freshness_state: freshness
      }
    }
  }
  return {
    type: "determination.updated",
    payload: { ...version, changed_fields: [...change.changed_fields], freshness_state: freshness }
  }
}

const rank = (state: FreshnessState) => FreshnessStates.indexOf(state)

/** The instant the next state after `announced` begins, or null when none follows. */
const nextDue = (timeline: ReturnType<typeof freshnessTimeline>, announced: FreshnessState): Date | null => {
  const next = timeline.find((entry) => rank(entry.state) > rank(announced))
  return next === undefined ? null : new Date(next.at)
}

const invalidParameter = (pointer: string, detail: string) =>
  new ValidationFailed({ detail: "The request failed validation.", errors: [new FieldError({ pointer, detail })] })

/**
 * The methods of `EventLog`. The writes (`append`, `recordChange`, `announceDue`) run inside the writer's
 * transaction and are `Effect.fn`s; the reads (`head`, `page`, `pageAt`) serve GET /events on every request
 * and stay plain functions with no span.
 */
export interface EventLogShape {
  /** Inside the caller's transaction: seals and stores the next event of the chain (and its outbox and log rows). */
  readonly append: (publicId: PublicId, type: EventType, payload: EventPayload) => Effect.Effect<TrustEvent, SqlError>
  /** Inside `ingest`'s transaction: the one event of a stored change, and the freshness state the chain stands at. */
  readonly recordChange: (change: DeterminationChange) => Effect.Effect<TrustEvent, SqlError>
  /** Under the determination's row lock: a freshness.changed per state entered since the last announced; how many. */
  readonly announceDue: (publicId: PublicId) => Effect.Effect<number, SqlError>
  /** Determinations whose next freshness boundary has passed, oldest first. */
  readonly dueForFreshness: (limit: number) => Effect.Effect<Array<PublicId>, SqlError>
  readonly head: (publicId: PublicId) => Effect.Effect<EventHead, DeterminationNotFound>
  /** Keyset page of events after `after`, bounded by the head read first. */
  readonly page: (publicId: PublicId, options?: PageOptions) => Effect.Effect<EventPage, DeterminationNotFound | ValidationFailed>
  /** Keyset page of events after `after`, bounded by `current` (a head read before). */
  readonly pageAt: (publicId: PublicId, current: EventHead, options?: PageOptions) => Effect.Effect<EventPage, ValidationFailed>
  /** Every public key any instance has signed with. */
  readonly jwks: Effect.Effect<EventJwks>
  readonly signer: SignerShape
}

export interface PageOptions {
  readonly after?: number | undefined
  readonly limit?: number | undefined
}

const make = Effect.gen(function*() {
  const repo = yield* EventsRepo
  const signer = yield* Signer
  const ids = yield* Ids
  const pending = yield* LogRepo
  const nudges = yield* LogNudge
  const { logEnabled } = yield* AppConfig
  // Every key that ever signs is recorded first, so the JWKS of every instance lists it.
  yield* Effect.orDie(repo.recordKey(signer.jwk, new Date(yield* Clock.currentTimeMillis)))

  /** Inside the caller's transaction: seal and store the next event of `publicId`'s chain. */
  const append = Effect.fn("EventLog.append")(function*(publicId: PublicId, type: EventType, payload: EventPayload) {
      const head = yield* repo.lockHead(publicId)
      if (Option.isNone(head)) return yield* Effect.die(new Error(`event append for ${publicId}, which has no determinations row`))
      const now = yield* Clock.currentTimeMillis
      const event = sealEvent({
        sequence: head.value.sequence + 1,
        event_id: yield* ids.make("evt"),
        public_id: publicId,
        type,
        occurred_at: new Date(now).toISOString(),
        payload,
        previousEventHash: head.value.eventHash
      }, signer)
      yield* repo.insertEvent(event)
      // The webhook outbox: every webhook subscription of the chain owes this event, committed with it.
      yield* repo.owe(publicId, event.sequence)
      // Its transparency-log entry commits with the event (docs/API.md §11.1).
      if (logEnabled) {
        yield* pending.enqueue("event", event.event_id, entryBytesOf(eventEntryOf(event)))
        yield* nudges.nudge
      }
      yield* countEventAppended(type)
      return event
  })

  /**
   * Inside `ingest`'s transaction: the one event of a stored change, and the freshness state the
   * chain now stands at (so the sweep only announces what time changes from here on).
   */
  const recordChange = Effect.fn("EventLog.recordChange")(function*(change: DeterminationChange) {
      const now = yield* Clock.currentTimeMillis
      const asOf = Date.parse(change.body.as_of)
      const validUntil = Date.parse(change.body.valid_until)
      const freshness = freshnessAt(now, asOf, validUntil, change.body.lifecycle_state)
      const { type, payload } = changeEventOf(change, freshness)
      const event = yield* append(change.public_id, type, payload)
      yield* repo.setFreshness(change.public_id, freshness, nextDue(freshnessTimeline(asOf, validUntil, change.body.lifecycle_state), freshness))
      return event
  })

  /**
   * Inside the caller's transaction, under the determination's row lock: a freshness.changed for each
   * state entered since the last announced one; returns how many were appended. A second caller waiting
   * on the lock then finds nothing left.
   */
  const announceDue = Effect.fn("EventLog.announceDue")(function*(publicId: PublicId) {
      const locked = yield* repo.lockFreshness(publicId)
      if (Option.isNone(locked)) return 0
      const row = locked.value
      const now = yield* Clock.currentTimeMillis
      const timeline = freshnessTimeline(row.as_of.getTime(), row.valid_until.getTime(), row.lifecycle_state)
      if (row.freshness_announced === null) {
        // A chain that predates freshness tracking starts announcing from today's state.
        const current = freshnessAt(now, row.as_of.getTime(), row.valid_until.getTime(), row.lifecycle_state)
        yield* repo.setFreshness(publicId, current, nextDue(timeline, current))
        return 0
      }
      let announced: FreshnessState = row.freshness_announced
      const entered = timeline.filter((entry) => rank(entry.state) > rank(announced) && entry.at <= now)
      for (const entry of entered) {
        yield* append(publicId, "freshness.changed", {
          determination_id: row.determination_id,
          previous_freshness_state: announced,
          freshness_state: entry.state,
          effective_at: new Date(entry.at).toISOString()
        })
        announced = entry.state
      }
      yield* repo.setFreshness(publicId, announced, nextDue(timeline, announced))
      return entered.length
  })

  /** Determinations whose next freshness boundary has passed, oldest first. */
  const dueForFreshness = (limit: number) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => repo.dueForFreshness(new Date(now), limit))

  const head = (publicId: PublicId): Effect.Effect<EventHead, DeterminationNotFound> =>
    Effect.orDie(repo.head(publicId)).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new DeterminationNotFound({ detail: `no determination ${publicId}` })),
        onSome: Effect.succeed
      }))
    )

  /**
   * Keyset page of events after `after`, bounded by `current` (a head read before), so the page and the head: Effect.fn("EventLog.head")(head)
   * it reports always agree and `next_after` is null exactly when the page reaches that head.
   */
  const pageAt = (
    publicId: PublicId,
    current: EventHead,
    options: { readonly after?: number | undefined; readonly limit?: number | undefined } = {}
  ): Effect.Effect<EventPage, ValidationFailed> =>
    Effect.gen(function*() {
      const after = options.after ?? 0
      const limit = options.limit ?? DefaultPageSize
      if (!Number.isSafeInteger(after) || after < 0) return yield* Effect.fail(invalidParameter("/after", "must be an integer ≥ 0"))
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > MaxPageSize) {
        return yield* Effect.fail(invalidParameter("/limit", `must be an integer between 1 and ${MaxPageSize}`))
      }
      const rows = yield* Effect.orDie(repo.page(publicId, after, current.sequence, limit + 1))
      const events: Array<TrustEvent> = rows.slice(0, limit)
      return {
        public_id: publicId,
        events,
        next_after: rows.length > limit ? events[events.length - 1]!.sequence : null,
        head: current
      }
    })

  /** Keyset page of events after `after`, bounded by the head read first. */
  const page = (
    publicId: PublicId,
    options: { readonly after?: number | undefined; readonly limit?: number | undefined } = {}
  ): Effect.Effect<EventPage, DeterminationNotFound | ValidationFailed> =>
    Effect.flatMap(head(publicId), (current) => pageAt(publicId, current, options))

  /** Every public key any instance has signed with (docs/API.md §7.9: retired keys stay published). */
  const jwks: Effect.Effect<EventJwks> = Effect.orDie(repo.keys).pipe(
    Effect.map((rows) => ({
      keys: rows.map((row) => ({ kty: "OKP", crv: "Ed25519", x: row.x, kid: row.kid, use: "sig", alg: "Ed25519" } as const))
    })),
    Effect.withSpan("EventLog.jwks")
  )

  return { append, recordChange, announceDue, dueForFreshness: Effect.fn("EventLog.dueForFreshness")(dueForFreshness), head, page: Effect.fn("EventLog.page")(page), pageAt: Effect.fn("EventLog.pageAt")(pageAt), jwks, signer } satisfies EventLogShape
})

/**
 * The signed, hash-chained event feed of each determination. Appends join the caller's transaction
 * and lock the determinations row, so a chain has one writer at a time and sequences stay gapless;
 * the (public_id, sequence) primary key refuses anything else. Nothing here opens a transaction,
 * notifies or evicts: the writer of trust state (trust/Determinations.ts) wraps every change.
 */
export class EventLog extends Context.Service<EventLog, EventLogShape>()("pv/EventLog", { make }) {
  static readonly layerNoDeps = Layer.effect(EventLog, make)
  static readonly layer = EventLog.layerNoDeps.pipe(
    Layer.provide([EventsRepo.layer, Signer.layer, Ids.layer, LogRepo.layer, LogNudge.layer])
  )

  /**
   * The real service for in-process service tests, with the fixed test signing key (`Signer.Test`) and
   * deterministic ids (`Ids.layerTest`); the clock is the caller's (a TestClock). Its dependencies stay
   * in its output, so the tests and the layers built on it share them. Needs the database and AppConfig.
   */
  static readonly layerTest = EventLog.layerNoDeps.pipe(
    Layer.provideMerge(Layer.mergeAll(EventsRepo.layer, Signer.Test, Ids.layerTest, LogRepo.layer, LogNudge.layer))
  )
}
