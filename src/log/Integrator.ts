import { Clock, Context, Duration, Effect, Exit, Layer, Option } from "effect"
import { type LogProgress, MetricsState } from "../observability/Metrics.js"
import { AppConfig } from "../platform/Config.js"
import { openCheckpoint, peekCheckpoint, signCheckpoint } from "./Checkpoint.js"
import { edgeFromTiles, edgeTilesOf, grow, rootOfEdge, tilesWritten, type WrittenTile } from "./Growth.js"
import { LogKey } from "./LogKey.js"
import { LogNudge } from "./LogNudge.js"
import { hashEquals, hexOf } from "./Merkle.js"
import { LogRepo, type StoredCheckpoint } from "./Repo.js"
import { TransparencyLog } from "./TransparencyLog.js"

/** Pending entries moved per integration round (one transaction). */
export const MaxEntriesPerRound = 10_000

/** Log size and integration lag for the metrics (observability/Metrics.ts). */
const observedRound = (log: LogProgress, round: Effect.Effect<IntegrationRound>): Effect.Effect<IntegrationRound> =>
  Effect.suspend(() => {
    const waiting = log.roundStarted()
    return Effect.onExit(round, (exit) =>
      Effect.sync(() =>
        log.roundEnded(waiting, Exit.isSuccess(exit) ? { ...exit.value, full: exit.value.appended >= MaxEntriesPerRound } : undefined)))
  })

/**
 * Rounds start at least this far apart unless the last one was full: under load, each round then
 * carries many entries (one commit and one checkpoint for all of them), and an idle log still
 * answers a nudge at once.
 */
const MinRoundSpacingMs = 200

/** After a nudge, wait this long so writes committing together are integrated together. */
const NudgeSettleMs = 5

export interface IntegrationRound {
  /** False when another instance held the integration lock. */
  readonly locked: boolean
  readonly size: number
  readonly appended: number
}

const makeLogIntegrator = Effect.gen(function*() {
  const repo = yield* LogRepo
  const key = yield* LogKey
  const log = yield* TransparencyLog
  const metrics = yield* MetricsState

  const sign = (size: number, root: Uint8Array): StoredCheckpoint => ({
    size,
    root,
    note: signCheckpoint({ origin: key.logOrigin, size, root, extensions: [] }, key.signer)
  })

  const round = repo.withTransaction(Effect.gen(function*() {
    const none: ReadonlyArray<WrittenTile> = []
    if (!(yield* repo.tryLockIntegration)) return { locked: false, size: -1, appended: 0, checkpoint: Option.none<StoredCheckpoint>(), written: none }
    const latest = yield* repo.latestCheckpoint
    const size = yield* repo.integratedSize
    if (Option.isSome(latest) && latest.value.size !== size) {
      return yield* Effect.die(new Error(`the log holds ${size} entries but its latest checkpoint covers ${latest.value.size}: refusing to integrate`))
    }
    // Read from the database, not a reader's cache: the check below is against what is stored now.
    const edgeData = yield* Effect.map(log.fetchTiles(edgeTilesOf(size)), (data) => (tile: { level: number; index: number }) => data.get(`${tile.level}/${tile.index}`))
    const edge = edgeFromTiles(size, edgeData)
    // Stored hashes that no longer give the published root mean the store was altered: extending it would fork.
    if (Option.isSome(latest)) {
      const stated = peekCheckpoint(latest.value.note)
      const root = rootOfEdge(edge)
      if (!stated.ok || stated.value.size !== size || !hashEquals(stated.value.root, latest.value.root) || !hashEquals(root, latest.value.root)) {
        return yield* Effect.die(new Error(`the stored tree of size ${size} (root ${hexOf(root)}) is not the one its latest checkpoint states: refusing to integrate`))
      }
    }
    const moved = yield* repo.movePending(size, MaxEntriesPerRound)
    if (moved.some((entry, i) => entry.index !== size + i)) return yield* Effect.die(new Error("moved entries did not get consecutive indexes"))
    const now = new Date(yield* Clock.currentTimeMillis)
    if (moved.length === 0) {
      if (Option.isNone(latest)) {
        const first = sign(0, rootOfEdge(edge))
        yield* repo.insertCheckpoint(first, now)
        return { locked: true, size, appended: 0, checkpoint: Option.some(first), written: none }
      }
      // A new log key or origin: the same tree, signed again, so /log/checkpoint verifies under /log/key.
      if (!openCheckpoint(latest.value.note, key.verifierKey).ok) {
        const resigned = sign(size, latest.value.root)
        yield* repo.resignCheckpoint(resigned)
        return { locked: true, size, appended: 0, checkpoint: Option.some(resigned), written: none }
      }
      return { locked: true, size, appended: 0, checkpoint: Option.none<StoredCheckpoint>(), written: none }
    }
    const grown = grow(edge, moved.map((entry) => entry.leaf))
    yield* repo.insertTileHashes(grown.tileHashes)
    const checkpoint = sign(grown.edge.size, grown.root)
    yield* repo.insertCheckpoint(checkpoint, now)
    return { locked: true, size: grown.edge.size, appended: moved.length, checkpoint: Option.some(checkpoint), written: tilesWritten(grown) }
  }))

  /** One round; once it has committed, this instance's readers see the new checkpoint (and the tiles it wrote) at once. */
  const published = round.pipe(
    Effect.tap(({ checkpoint, written }) => Option.match(checkpoint, { onNone: () => Effect.void, onSome: (c) => log.published(c, written) })),
    Effect.map(({ locked, size, appended }): IntegrationRound => ({ locked, size, appended }))
  )
  const integrateOnce: Effect.Effect<IntegrationRound> = published.pipe(
    Effect.catchTag("SqlError", Effect.die),
    (integrated) => observedRound(metrics.log, integrated),
    Effect.withSpan("LogIntegrator.integrateOnce")
  )

  /**
   * A round only when entries are pending: otherwise one cheap statement, and the round is reported as one that
   * covered everything (nothing written before it still waits). An idle round would open a transaction, take the
   * lock, read the edge's tiles, hash them and verify the checkpoint's signature, four times a second in every
   * process (~0.04 of a core each, measured idle). The checks against a changed store belong to the round that
   * extends the tree, which still makes them; a changed key is re-signed by the round at start.
   */
  const integrateIfPending: Effect.Effect<IntegrationRound> = repo.idleSize.pipe(
    Effect.flatMap((size) => size === undefined ? published : Effect.succeed({ locked: true, size, appended: 0 })),
    Effect.catchTag("SqlError", Effect.die),
    (integrated) => observedRound(metrics.log, integrated),
    Effect.withSpan("LogIntegrator.integrateIfPending")
  )

  return { integrateOnce, integrateIfPending } satisfies LogIntegratorShape
})

export interface LogIntegratorShape {
  /** One round; once it has committed, this instance's readers see the new checkpoint at once. */
  readonly integrateOnce: Effect.Effect<IntegrationRound>
  /** `integrateOnce` when entries are pending; else nothing but one statement (the periodic rounds). */
  readonly integrateIfPending: Effect.Effect<IntegrationRound>
}

/**
 * The one writer of the tree. A round, in ONE transaction under `pg_try_advisory_xact_lock` (so at
 * most one instance integrates at a time, trivially on the single-connection embedded database):
 * read the right edge of the stored tree and check it still gives the latest checkpoint's root;
 * move pending entries to the next indexes; store the tile hashes they complete; sign and store
 * the new checkpoint. A crash at any point rolls the round back whole, so the next round (on any
 * instance) continues from the last committed checkpoint: nothing is lost and the tree never forks.
 */
export class LogIntegrator extends Context.Service<LogIntegrator, LogIntegratorShape>()("pv/LogIntegrator", {
  make: makeLogIntegrator
}) {
  static readonly layerNoDeps = Layer.effect(this, makeLogIntegrator)
  static readonly layer = this.layerNoDeps.pipe(Layer.provide([LogRepo.layer, LogKey.layer, TransparencyLog.layer]))
}

/**
 * The integrator fiber of this instance: a round at start (the first checkpoint, entries enqueued
 * by the migration, a changed key) before the port opens, then every PV_LOG_INTEGRATION_INTERVAL_MS
 * or sooner when a local write nudges it (a round only if entries are pending: `integrateIfPending`), at
 * once again while a round was full, and a last round on stop. A failed round (database away, lock taken) is logged and retried on the next tick.
 */
export const LogIntegratorLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const integrator = yield* LogIntegrator
    const nudges = yield* LogNudge
    const config = yield* AppConfig
    const logged = <A, E>(work: Effect.Effect<A, E>) =>
      work.pipe(Effect.asVoid, Effect.catchCause((cause) => Effect.logWarning("log integration failed; retrying", cause)))
    yield* logged(integrator.integrateOnce)
    const interval = config.logIntegrationIntervalMs
    if (interval === 0) return
    // Registered before the fiber is forked, so it runs after the fiber is interrupted: writes acknowledged before the stop get their checkpoint.
    yield* Effect.addFinalizer(() => logged(integrator.integrateOnce.pipe(Effect.timeout("2 seconds"))))
    yield* Effect.gen(function*() {
      const started = yield* Clock.currentTimeMillis
      const result = yield* integrator.integrateIfPending
      if (result.appended >= MaxEntriesPerRound) return
      yield* nudges.wait(interval)
      // Clamped: a clock moved backwards (tests shift it) never lengthens the wait.
      const elapsed = Math.max(0, (yield* Clock.currentTimeMillis) - started)
      yield* Effect.sleep(Duration.millis(Math.max(NudgeSettleMs, Math.min(interval, MinRoundSpacingMs) - elapsed)))
    }).pipe(
      Effect.catchCause((cause) => Effect.andThen(Effect.logWarning("log integration failed; retrying", cause), Effect.sleep(Duration.millis(interval)))),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
