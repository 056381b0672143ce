import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Schedule, Stream } from "effect"
import type { MachineTrustResponse } from "../domain/MachineTrust.js"
import { DatabaseMode } from "../platform/Database.js"

/** PostgreSQL channel on which every committed change of a determination's trust state is announced. */
export const TrustChangedChannel = "pv_trust_changed"

/** Even if a notification were lost, no instance serves a document older than this. */
export const TrustCacheMaxAgeMs = 5_000
/** A document and its JSON are ~6 KB: 10,000 entries stay under ~60 MB. */
const capacity = 10_000

export interface CachedTrust {
  readonly document: MachineTrustResponse
  /**
   * The document encoded through MachineTrustResponse (the trust endpoints' success schema) and serialised
   * once, on first use; sent as-is on every hit.
   */
  readonly json: string
  /** When the document was built: its freshness state holds from here … */
  readonly builtAtMs: number
  /** … until the next freshness boundary (or forever once EXPIRED). */
  readonly validUntilMs: number
}

const make = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient
  const mode = yield* DatabaseMode
  const entries = new Map<string, CachedTrust>()
  const generations = new Map<string, number>()

  const generation = (publicId: string) => generations.get(publicId) ?? 0

  const get = (publicId: string, nowMs: number): CachedTrust | undefined => {
    const entry = entries.get(publicId)
    return entry !== undefined && entry.builtAtMs <= nowMs && nowMs < entry.validUntilMs &&
        nowMs < entry.builtAtMs + TrustCacheMaxAgeMs
      ? entry
      : undefined
  }

  /** Stores the entry only if nothing evicted the key since `seenGeneration` was read. */
  const put = (publicId: string, seenGeneration: number, entry: CachedTrust) => {
    if (generation(publicId) !== seenGeneration) return
    if (!entries.has(publicId) && entries.size >= capacity) {
      const oldest = entries.keys().next().value
      if (oldest !== undefined) entries.delete(oldest)
    }
    entries.set(publicId, entry)
  }

  /** After a commit (the writer's own, or another instance's notification): the cached document is gone. */
  const evict = (publicId: string) =>
    Effect.sync(() => {
      entries.delete(publicId)
      generations.set(publicId, generation(publicId) + 1)
    })

  const clear = Effect.sync(() => {
    for (const key of entries.keys()) generations.set(key, generation(key) + 1)
    entries.clear()
  })

  /** Inside the writer's transaction: tell every instance, at commit, that `publicId` changed. */
  const notify = (publicId: string) => sql`SELECT pg_notify(${TrustChangedChannel}, ${publicId})`.pipe(Effect.asVoid)

  // The embedded database has one instance (and one connection, which LISTEN would hold forever).
  if (mode.kind === "postgres") {
    yield* Effect.scoped(Effect.flatMap(
      sql.listen(TrustChangedChannel),
      (notifications) => Stream.runForEach(Stream.fromQueue(notifications), (n) => evict(n.payload))
    )).pipe(
      // A dropped listener may have missed notifications: forget everything, then listen again.
      Effect.tapCause(() => clear),
      Effect.retry(Schedule.spaced("1 second")),
      Effect.forkScoped
    )
  }

  return { get, put, generation, evict, notify } as const
})

/**
 * Trust documents by public id, so a warm read costs no database round trip. An entry is used only in
 * [builtAt, min(next freshness boundary, builtAt + 5 s)). Only the writer (Determinations) changes trust
 * state: it `notify`s inside its transaction (every instance listening on PostgreSQL evicts) and `evict`s
 * here after the commit. A per-key generation stops a read that raced a write from caching what it read
 * before the write committed.
 */
export class TrustCache extends Context.Service<TrustCache, Effect.Success<typeof make>>()("pv/TrustCache", { make }) {
  static readonly layer = Layer.effect(TrustCache, make)
}
