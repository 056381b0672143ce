import { Context, Effect, Layer } from "effect"
import type { MachineTrustResponse } from "../domain/MachineTrust.js"
import { ChangeFeed } from "../events/ChangeFeed.js"

/** Even if a notification were lost, no instance serves a document older than this. */
export const TrustCacheMaxAgeMs = 5_000
/**
 * A document and its JSON are ~6 KB. An entry is never served past TrustCacheMaxAgeMs, so one that old is
 * dropped (the oldest are swept whenever a document is built): the map holds the documents built in the
 * last 5 s, not every document read since the start. The capacity bounds even that (~60 MB).
 */
const capacity = 10_000

export interface CachedTrust {
  readonly document: MachineTrustResponse
  /** When the document was built: its freshness state holds from here … */
  readonly builtAtMs: number
  /** … until the next freshness boundary (or forever once EXPIRED). */
  readonly validUntilMs: number
}

/**
 * The entries and their generations, without the change feed. Entries are kept in the order they were built
 * (a rebuilt key moves to the end), so the stale ones are at the front.
 */
export const trustEntries = (maxEntries: number = capacity) => {
  const entries = new Map<string, CachedTrust>()
  const generations = new Map<string, number>()
  /** Bumped by `clear`: a build that began before it (of any key, cached or not) is not stored. */
  let epoch = 0

  // Both terms only grow, so the sum changes whenever either does.
  const generation = (publicId: string) => (generations.get(publicId) ?? 0) + epoch

  const get = (publicId: string, nowMs: number): CachedTrust | undefined => {
    const entry = entries.get(publicId)
    return entry !== undefined && entry.builtAtMs <= nowMs && nowMs < entry.validUntilMs &&
        nowMs < entry.builtAtMs + TrustCacheMaxAgeMs
      ? entry
      : undefined
  }

  /** Drops the oldest entries while they can no longer be served (too old, or built after `nowMs`: the clock moved back). */
  const sweep = (nowMs: number) => {
    for (const [key, entry] of entries) {
      if (entry.builtAtMs <= nowMs && nowMs < entry.builtAtMs + TrustCacheMaxAgeMs) return
      entries.delete(key)
    }
  }

  /** Stores the entry only if nothing evicted the key since `seenGeneration` was read. */
  const put = (publicId: string, seenGeneration: number, entry: CachedTrust) => {
    if (generation(publicId) !== seenGeneration) return
    entries.delete(publicId)
    sweep(entry.builtAtMs)
    if (entries.size >= maxEntries) {
      const oldest = entries.keys().next().value
      if (oldest !== undefined) entries.delete(oldest)
    }
    entries.set(publicId, entry)
  }

  /** After a commit (the writer's own, or another instance's notification): the cached document is gone. */
  const evict = (publicId: string) => {
    entries.delete(publicId)
    generations.set(publicId, (generations.get(publicId) ?? 0) + 1)
  }

  const clear = () => {
    epoch++
    entries.clear()
  }

  return { get, put, generation, evict, clear, size: () => entries.size } as const
}

/** The methods of `TrustCache`: synchronous reads for the hot path, eviction as an Effect. */
export interface TrustCacheShape {
  /** The entry for `publicId` if it may be served at `nowMs`. */
  readonly get: (publicId: string, nowMs: number) => CachedTrust | undefined
  /** Stores the entry only if nothing evicted the key since `seenGeneration` was read. */
  readonly put: (publicId: string, seenGeneration: number, entry: CachedTrust) => void
  /** The key's eviction count, read before a build so a build that raced a write is not cached. */
  readonly generation: (publicId: string) => number
  /** Drops the key's entry (a commit changed it). */
  readonly evict: (publicId: string) => Effect.Effect<void>
}

const make = Effect.gen(function*() {
  const feed = yield* ChangeFeed
  const cache = trustEntries()
  const { put, generation } = cache
  const serving = feed.serving
  // Served only while this process's read lease is surely valid (always on the embedded database).
  const get = (publicId: string, nowMs: number) => performance.now() < serving.untilMs ? cache.get(publicId, nowMs) : undefined
  const evict = Effect.fn("TrustCache.evict")((publicId: string) => Effect.sync(() => cache.evict(publicId)))

  // Every committed change, this instance's (right after its commit) or another's (PostgreSQL NOTIFY).
  yield* feed.listen((notice) => {
    if (notice._tag === "resync") cache.clear()
    else cache.evict(notice.publicId)
  })

  return { get, put, generation, evict } satisfies TrustCacheShape
})

/**
 * Trust documents by public id, so a warm read costs no database round trip. An entry is used only in
 * [builtAt, min(next freshness boundary, builtAt + 5 s)). Only the writer (Determinations) changes trust
 * state, through the change feed (events/ChangeFeed.ts): every instance evicts when it hears of a commit,
 * this instance right after its own. On PostgreSQL an entry is served only while this process's read lease
 * is valid, so a writer's answer waits until no process can serve what it replaced (events/ReadLease.ts). A per-key generation stops a read that raced a write from caching what it read
 * before the write committed.
 */
export class TrustCache extends Context.Service<TrustCache, TrustCacheShape>()("pv/TrustCache", { make }) {
  static readonly layer = Layer.effect(TrustCache, make).pipe(Layer.provide(ChangeFeed.layer))
}
