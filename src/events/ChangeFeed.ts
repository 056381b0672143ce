import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Queue, Schedule, type Scope, Stream } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { DatabaseMode } from "../platform/Database.js"

/** PostgreSQL channel on which every committed change of a determination's trust state is announced. */
export const TrustChangedChannel = "pv_trust_changed"

/**
 * What a listener hears: a determination whose trust state (and so its event chain) changed, or
 * `resync` when changes may have been missed (the PostgreSQL listener went down, and again once it listens
 * again, on PostgreSQL also when it first listens): assume everything changed.
 */
export type ChangeNotice = { readonly _tag: "changed"; readonly publicId: string } | { readonly _tag: "resync" }

/** A coalescing view of the feed for one consumer: never drops a change, never grows past the ids it watches. */
export interface ChangeWatch {
  /** Waits until something changed since the last call; the public ids that did, or "all" after a resync. */
  readonly next: Effect.Effect<ReadonlySet<string> | "all">
}

export interface ChangeFeedShape {
  /** Inside the writer's transaction: every instance listening hears of `publicId` when it commits. */
  readonly notify: (publicId: string) => Effect.Effect<void, SqlError>
  /** After this instance's own commit: tell this instance's listeners at once (synchronously). */
  readonly committed: (publicId: string) => Effect.Effect<void>
  /**
   * A synchronous listener for the life of the scope, called for local commits and, on PostgreSQL, for
   * every instance's (its own included: listeners must be idempotent).
   */
  readonly listen: (listener: (notice: ChangeNotice) => void) => Effect.Effect<void, never, Scope.Scope>
  /** A coalescing watch for the life of the scope; `filter` keeps only the ids the consumer cares for. */
  readonly watch: (filter?: (publicId: string) => boolean) => Effect.Effect<ChangeWatch, never, Scope.Scope>
}

const make = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient
  const mode = yield* DatabaseMode
  const listeners = new Set<(notice: ChangeNotice) => void>()

  const dispatch = (notice: ChangeNotice) => {
    for (const listener of listeners) listener(notice)
  }

  const notify = (publicId: string) => sql`SELECT pg_notify(${TrustChangedChannel}, ${publicId})`.pipe(Effect.asVoid)

  const committed = (publicId: string) => Effect.sync(() => dispatch({ _tag: "changed", publicId }))

  const listen = (listener: (notice: ChangeNotice) => void) =>
    Effect.acquireRelease(Effect.sync(() => listeners.add(listener)), () => Effect.sync(() => listeners.delete(listener))).pipe(
      Effect.asVoid
    )

  const watch = (filter?: (publicId: string) => boolean) =>
    Effect.gen(function*() {
      const signal = yield* Queue.sliding<void>(1)
      let dirty = new Set<string>()
      let all = false
      yield* listen((notice) => {
        if (notice._tag === "resync") all = true
        else if (filter === undefined || filter(notice.publicId)) dirty.add(notice.publicId)
        else return
        Queue.offerUnsafe(signal, undefined)
      })
      const next = Effect.map(Queue.take(signal), (): ReadonlySet<string> | "all" => {
        if (all) {
          all = false
          dirty = new Set()
          return "all"
        }
        const taken = dirty
        dirty = new Set()
        return taken
      })
      return { next } satisfies ChangeWatch
    })

  // The embedded database has one instance (and one connection, which LISTEN would hold forever).
  if (mode.kind === "postgres") {
    const resync = Effect.sync(() => dispatch({ _tag: "resync" }))
    yield* Effect.scoped(Effect.flatMap(
      sql.listen(TrustChangedChannel),
      // Once PostgreSQL confirms LISTEN, everyone re-reads: what committed while nobody listened (the moment
      // before the first LISTEN, the gap before a LISTEN that came back) was announced to no one.
      (notifications) =>
        Effect.andThen(
          resync,
          Stream.runForEach(Stream.fromQueue(notifications), (n) => Effect.sync(() => dispatch({ _tag: "changed", publicId: n.payload })))
        )
    )).pipe(
      // A dropped listener may have missed notifications: everyone starts over now, again once we listen again.
      Effect.tapCause(() => resync),
      Effect.retry(Schedule.spaced("1 second")),
      Effect.forkScoped
    )
  }

  return { notify, committed, listen, watch } satisfies ChangeFeedShape
})

/**
 * Every committed change of a determination's trust state, on every instance: the writer
 * (trust/Determinations.ts) `notify`s inside its transaction (PostgreSQL delivers it to every instance's
 * LISTEN at commit) and calls `committed` after its own commit; on the embedded database, which has one
 * instance, `committed` is the whole feed. Consumers (the trust cache, webhook deliveries, event streams,
 * event-page caches) re-read what they need from the database: a notice is a hint, never the data.
 */
export class ChangeFeed extends Context.Service<ChangeFeed, ChangeFeedShape>()("pv/ChangeFeed") {
  static readonly layer = Layer.effect(ChangeFeed, make)
}
