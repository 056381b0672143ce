import { Clock, Context, Deferred, Duration, Effect, Exit, Layer, Option } from "effect"
import { digestOf } from "../domain/Canonical.js"
import type { DeterminationBody } from "../domain/Determination.js"
import { DeterminationNotFound } from "../domain/Problem.js"
import type { PublicId } from "../domain/PublicId.js"
import { ChangeFeed } from "../events/ChangeFeed.js"
import { EventLog } from "../events/EventLog.js"
import { Ids } from "../platform/Ids.js"
import { type CurrentDetermination, DeterminationsRepo } from "./Repo.js"

export type IngestOutcome = "created" | "updated" | "unchanged"

export interface IngestResult {
  readonly outcome: IngestOutcome
  readonly public_id: PublicId
  readonly determination_id: string
  readonly determination_digest: string
  readonly version: number
  readonly changed_fields: ReadonlyArray<string>
}

/** How often each instance looks for freshness boundaries that have passed. */
export const SweepInterval = Duration.seconds(1)
const sweepBatch = 100

/** Top-level fields of the ingestion body whose canonical value differs between two versions. */
export const changedFields = (previous: DeterminationBody | null, next: DeterminationBody): ReadonlyArray<string> => {
  const keys = new Set([...Object.keys(previous ?? {}), ...Object.keys(next)])
  return [...keys].filter((key) =>
    previous === null ||
    digestOf((previous as Record<string, unknown>)[key] ?? null) !== digestOf((next as Record<string, unknown>)[key] ?? null)
  ).sort()
}

/** The methods of `Determinations`: the one writer of a determination's trust state, and its reads. */
export interface DeterminationsShape {
  /** Operator ingestion: one stored version and its one event per change; an identical body changes nothing. */
  readonly ingest: (publicId: PublicId, body: DeterminationBody) => Effect.Effect<IngestResult>
  /** Announces the freshness transitions time has brought to one determination; concurrent readers share one run. */
  readonly announceFreshness: (publicId: PublicId) => Effect.Effect<void>
  /** Announces every freshness transition that is due; succeeds with how many events were appended. */
  readonly sweepOnce: Effect.Effect<number>
  /** The current version with its event head. */
  readonly current: (publicId: PublicId) => Effect.Effect<CurrentDetermination, DeterminationNotFound>
  /** The current versions of one subject's determinations, by public id. */
  readonly bySubject: (subjectId: string) => Effect.Effect<Array<CurrentDetermination>>
  /** How many determinations are stored. */
  readonly count: Effect.Effect<number>
}

const make = Effect.gen(function*() {
  const repo = yield* DeterminationsRepo
  const ids = yield* Ids
  const events = yield* EventLog
  const feed = yield* ChangeFeed
  const scope = yield* Effect.scope

  /**
   * The one way a determination's trust state changes: `work` stores the change and appends its events
   * in one transaction, which also notifies every instance listening (delivered at commit); right after
   * the commit this instance's listeners hear of it (its cached document is evicted, so no reader here can
   * serve the state from before; deliveries and streams wake).
   */
  const commitChange = <A, E, R>(publicId: PublicId, work: Effect.Effect<A, E, R>, changed: (result: A) => boolean) =>
    repo.withTransaction(Effect.tap(work, (result) => changed(result) ? feed.notify(publicId) : Effect.void)).pipe(
      Effect.tap((result) => changed(result) ? feed.committed(publicId) : Effect.void)
    )

  /** Operator ingestion: one stored version and its one event per change; an identical body changes nothing. */
  const ingest = Effect.fn("Determinations.ingest")((publicId: PublicId, body: DeterminationBody): Effect.Effect<IngestResult> => {
    const determinationDigest = digestOf(body)
    return commitChange(publicId, Effect.gen(function*() {
      const now = new Date(yield* Clock.currentTimeMillis)
      const head = yield* repo.lockHead(publicId, body.subject.subject_id, now)
      if (head.determination_digest === determinationDigest) {
        const stored = Option.getOrThrow(yield* repo.findCurrent(publicId))
        return {
          outcome: "unchanged",
          public_id: publicId,
          determination_id: stored.determination_id,
          determination_digest: determinationDigest,
          version: stored.version,
          changed_fields: []
        } satisfies IngestResult
      }
      const determinationId = yield* ids.make("dv")
      const version = head.current_version + 1
      yield* repo.insertVersion({
        public_id: publicId,
        determination_id: determinationId,
        version,
        body,
        determination_digest: determinationDigest,
        evidence_digest: digestOf(body.evidence),
        recorded_at: now
      })
      const changed = changedFields(head.body, body)
      // The one event of this change, in this transaction: committed together or not at all.
      yield* events.recordChange({
        public_id: publicId,
        determination_id: determinationId,
        version,
        determination_digest: determinationDigest,
        previous: head.body,
        body,
        changed_fields: changed
      })
      return {
        outcome: version === 1 ? "created" : "updated",
        public_id: publicId,
        determination_id: determinationId,
        determination_digest: determinationDigest,
        version,
        changed_fields: changed
      } satisfies IngestResult
    }), (result) => result.outcome !== "unchanged").pipe(Effect.catchTag("SqlError", Effect.die))
  })

  /** The freshness transitions of one determination that time has brought, each a freshness.changed event. */
  const announceDue = Effect.fn("Determinations.announceDue")((publicId: PublicId): Effect.Effect<number> =>
    commitChange(publicId, events.announceDue(publicId), (appended) => appended > 0).pipe(Effect.catchTag("SqlError", Effect.die))
  )

  // Announcements a reader waits for, one per determination at a time (readers of one id share it).
  const announcing = new Map<string, Deferred.Deferred<void>>()

  /**
   * For a reader that found a freshness boundary passed but not yet announced: the announcement runs here,
   * in the writer's own fiber (a reader interrupted meanwhile does not abort it), and the reader waits for
   * it. Concurrent readers of one determination wait for the same announcement.
   */
  const announceFreshness = Effect.fn("Determinations.announceFreshness")((publicId: PublicId): Effect.Effect<void> =>
    Effect.suspend(() => {
      const running = announcing.get(publicId)
      if (running !== undefined) return Deferred.await(running)
      const done = Deferred.makeUnsafe<void>()
      announcing.set(publicId, done)
      return announceDue(publicId).pipe(
        Effect.exit,
        Effect.flatMap((exit) => {
          announcing.delete(publicId)
          return Deferred.done(done, Exit.asVoid(exit))
        }),
        Effect.forkIn(scope),
        Effect.andThen(Deferred.await(done))
      )
    }))

  /** Announce every freshness transition that is due; returns how many events were appended. */
  const sweepOnce: Effect.Effect<number> = Effect.gen(function*() {
    let appended = 0
    for (;;) {
      const due = yield* events.dueForFreshness(sweepBatch)
      for (const publicId of due) appended += yield* announceDue(publicId)
      if (due.length < sweepBatch) return appended
    }
  }).pipe(Effect.catchTag("SqlError", Effect.die), Effect.withSpan("Determinations.sweepOnce"))

  const current = Effect.fn("Determinations.current")((publicId: PublicId): Effect.Effect<CurrentDetermination, DeterminationNotFound> =>
    Effect.orDie(repo.findCurrent(publicId)).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new DeterminationNotFound({ detail: `no determination ${publicId}` })),
        onSome: Effect.succeed
      }))
    ))

  const bySubject = Effect.fn("Determinations.bySubject")((subjectId: string) => Effect.orDie(repo.findBySubject(subjectId)))

  return { ingest, announceFreshness, sweepOnce, current, bySubject, count: Effect.orDie(repo.count).pipe(Effect.withSpan("Determinations.count")) } satisfies DeterminationsShape
})

/**
 * Determination records, and the one writer of a determination's trust state: operator ingestion (one
 * stored version per change; the PUT endpoint and `pv import` both come through `ingest`) and the
 * freshness transitions time brings (`sweepOnce`, `announceFreshness`). Every change goes store → event →
 * notify other instances → evict this instance's cache, here and nowhere else. Also reads the current version.
 */
export class Determinations extends Context.Service<Determinations, DeterminationsShape>()("pv/Determinations", { make }) {
  static readonly layerNoDeps = Layer.effect(Determinations, make)
  static readonly layer = Determinations.layerNoDeps.pipe(
    Layer.provide([DeterminationsRepo.layer, Ids.layer, EventLog.layer, ChangeFeed.layer])
  )

  /** The real service over `EventLog.layerTest` (test signer, deterministic ids), its dependencies in its output. */
  static readonly layerTest = Determinations.layerNoDeps.pipe(
    Layer.provideMerge(Layer.mergeAll(DeterminationsRepo.layer, ChangeFeed.layer)),
    Layer.provideMerge(EventLog.layerTest)
  )
}

/**
 * The background freshness sweep, forked for the life of the server. Safe on every instance at once;
 * a failed round (database away) is logged and retried at the next tick.
 */
export const EventSweeperLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const determinations = yield* Determinations
    yield* determinations.sweepOnce.pipe(
      Effect.catchCause((cause) => Effect.logWarning("freshness sweep failed; retrying", cause)),
      Effect.andThen(Effect.sleep(SweepInterval)),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
