import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Queue, Schedule, type Scope, Stream } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { DatabaseMode } from "../platform/Database.js"
import { fenceOf, fencePrefix, initialLease, leaseMs, onHeard, onListenLost, onRenewed, renewEveryMs } from "./ReadLease.js"

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
  /**
   * After this instance's own commit: tell this instance's listeners at once (synchronously), then, on
   * PostgreSQL, wait until no other process can serve a document from before the commit (read your writes:
   * events/ReadLease.ts), at most one lease length.
   */
  readonly committed: (publicId: string) => Effect.Effect<void>
  /**
   * Until when (`performance.now()` ms) this process may serve trust documents from its cache: while its
   * lease is surely valid on PostgreSQL, always on the embedded database. A live value: read it at each use.
   */
  readonly serving: { readonly untilMs: number }
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

  const dispatchLocal = (publicId: string) => Effect.sync(() => dispatch({ _tag: "changed", publicId }))
  const serving = { untilMs: mode.kind === "postgres" ? 0 : Number.POSITIVE_INFINITY }
  let committed: (publicId: string) => Effect.Effect<void> = dispatchLocal

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
    const readerId = crypto.randomUUID()
    let lease = initialLease
    /** Counts LISTEN connections confirmed: a renew sent on an earlier one does not extend this one's lease. */
    let listening = 0
    let healthy = false
    const ackWanted = yield* Queue.sliding<void>(1)
    const update = (next: typeof lease) => {
      lease = next
      serving.untilMs = next.servingUntilMs
    }
    const heard = (payload: string) => {
      const fence = fenceOf(payload)
      if (fence === undefined) return dispatch({ _tag: "changed", publicId: payload })
      update(onHeard(lease, fence))
      Queue.offerUnsafe(ackWanted, undefined)
    }
    const resync = Effect.sync(() => dispatch({ _tag: "resync" }))
    const giveUp = sql`UPDATE trust_read_leases SET lease_until = now() WHERE reader_id = ${readerId}`.pipe(Effect.ignore)
    const lost = Effect.sync(() => {
      healthy = false
      update(onListenLost(lease))
    })
    yield* Effect.scoped(Effect.flatMap(
      sql.listen(TrustChangedChannel),
      // Once PostgreSQL confirms LISTEN, everyone re-reads: what committed while nobody listened (the moment
      // before the first LISTEN, the gap before a LISTEN that came back) was announced to no one.
      (notifications) =>
        Effect.andThen(
          Effect.andThen(resync, Effect.sync(() => {
            healthy = true
            listening++
          })),
          Stream.runForEach(Stream.fromQueue(notifications), (n) => Effect.sync(() => heard(n.payload)))
        )
    )).pipe(
      // A dropped listener may have missed notifications: stop serving from the cache, everyone starts over
      // now, again once we listen again. Having stopped serving, give the lease up, so no writer waits on it
      // (a renew already in flight may extend it once more: a writer then waits, as for a dead process).
      Effect.tapCause(() => Effect.andThen(Effect.andThen(lost, resync), Effect.suspend(() => giveUp))),
      Effect.retry(Schedule.spaced("1 second")),
      Effect.ensuring(lost),
      Effect.forkScoped
    )

    // Renew the lease while LISTEN is up, with a fence: hearing it back proves LISTEN delivered everything
    // committed before the renew was sent, and only then does the local lease move on. Expired rows go.
    const renew = Effect.gen(function*() {
      if (!healthy) return
      const on = listening
      const sentAtMs = performance.now()
      const rows = yield* sql<{ readonly fence: string }>`
        WITH f AS (SELECT nextval('trust_fence_seq') AS n),
        gone AS (DELETE FROM trust_read_leases WHERE lease_until < now() - interval '1 minute'),
        renewed AS (
          INSERT INTO trust_read_leases (reader_id, acked_fence, lease_until)
          VALUES (${readerId}, ${String(lease.heard)}::bigint, now() + ${leaseMs} * interval '1 millisecond')
          ON CONFLICT (reader_id) DO UPDATE SET lease_until = EXCLUDED.lease_until)
        SELECT n::text AS fence, pg_notify(${TrustChangedChannel}, ${fencePrefix} || n::text) FROM f`
      if (healthy && on === listening) update(onRenewed(lease, BigInt(rows[0]!.fence), sentAtMs))
    })
    yield* renew.pipe(
      Effect.catch(() => Effect.void),
      Effect.repeat(Schedule.spaced(`${renewEveryMs} millis`)),
      Effect.forkScoped
    )

    // Ack the highest fence heard, promptly; a burst of fences is one update.
    let acked = -1n
    const ack = Effect.gen(function*() {
      yield* Queue.take(ackWanted)
      const fence = lease.heard
      if (fence <= acked) return
      yield* sql`
        INSERT INTO trust_read_leases (reader_id, acked_fence, lease_until) VALUES (${readerId}, ${String(fence)}::bigint, now())
        ON CONFLICT (reader_id) DO UPDATE SET acked_fence = greatest(trust_read_leases.acked_fence, EXCLUDED.acked_fence)`
      acked = fence
    })
    yield* ack.pipe(Effect.catch(() => Effect.void), Effect.forever, Effect.forkScoped)

    // Leave no lease behind on a clean stop (a killed process's row expires).
    yield* Effect.addFinalizer(() =>
      sql`DELETE FROM trust_read_leases WHERE reader_id = ${readerId}`.pipe(Effect.ignore)
    )

    /**
     * After the commit, a fence: every leased reader that acked it heard the commit's notification first
     * (notifications arrive in commit order, and this fence was numbered after the commit). Wait for those
     * acks, at most one lease length: a reader that has not acked by then can no longer serve from a lease
     * renewed before the commit (servableUntil), and a later renew's fence came after the change. So on any
     * failure here, waiting one lease length is as safe.
     */
    const fenceAndWait = Effect.gen(function*() {
      const rows = yield* sql<{ readonly fence: string }>`
        SELECT n::text AS fence, pg_notify(${TrustChangedChannel}, ${fencePrefix} || n::text)
        FROM (SELECT nextval('trust_fence_seq') AS n) f`
      const fence = rows[0]!.fence
      const deadline = performance.now() + leaseMs
      let pauseMs = 1
      for (;;) {
        const [waiting] = yield* sql<{ readonly n: number }>`
          SELECT count(*)::int AS n FROM trust_read_leases
          WHERE lease_until > now() AND acked_fence < ${fence}::bigint AND reader_id <> ${readerId}`
        const left = deadline - performance.now()
        if (waiting!.n === 0 || left <= 0) return
        yield* Effect.sleep(Math.min(pauseMs, left))
        pauseMs = Math.min(pauseMs * 2, 16)
      }
    }).pipe(Effect.catch(() => Effect.sleep(leaseMs)))

    committed = (publicId: string) => Effect.andThen(dispatchLocal(publicId), fenceAndWait)
  }

  return {
    notify: Effect.fn("ChangeFeed.notify")(notify),
    // `committed` is chosen above by the database mode: read when called.
    committed: Effect.fn("ChangeFeed.committed")((publicId: string) => committed(publicId)),
    listen: Effect.fn("ChangeFeed.listen")(listen),
    watch: Effect.fn("ChangeFeed.watch")(watch),
    serving
  } satisfies ChangeFeedShape
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
