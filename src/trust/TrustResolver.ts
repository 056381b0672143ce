import { Clock, Context, Effect, Layer } from "effect"
import { nextFreshnessBoundary } from "../domain/Freshness.js"
import { buildMachineTrust, type MachineTrustResponse } from "../domain/MachineTrust.js"
import type { DeterminationNotFound } from "../domain/Problem.js"
import type { PublicId } from "../domain/PublicId.js"
import { Determinations } from "./Determinations.js"
import { Policy } from "./Policy.js"
import { type CachedTrust, TrustCache } from "./TrustCache.js"

/**
 * publicId → canonical trust document (the methods of `TrustResolver`). `resolveCached` and `peek` answer
 * every warm read: they stay plain functions with no span (GET /machine, MCP resolve_trust and receipts
 * pass through them on every request); the cold path (`build`) is an `Effect.fn`.
 */
export interface TrustResolverShape {
  /** The document, from the cache when it is still exact, else built (and cached). */
  readonly resolve: (publicId: PublicId) => Effect.Effect<MachineTrustResponse, DeterminationNotFound>
  /** The document with its cache entry (the trust endpoints keep their answers per entry). */
  readonly resolveCached: (publicId: PublicId) => Effect.Effect<CachedTrust, DeterminationNotFound>
  /**
   * The document `resolve` would answer at `nowMs`, when the cache holds it still exact; undefined when
   * only `resolve` can tell (not cached, or a freshness boundary passed). Synchronous: no Effect to run.
   */
  readonly peek: (publicId: PublicId, nowMs: number) => MachineTrustResponse | undefined
}

const make = Effect.gen(function*() {
  const determinations = yield* Determinations
  const policy = yield* Policy
  const cache = yield* TrustCache

  /** The document's cache entry, from the cache when it is still exact. */
  const resolveCached = (publicId: PublicId): Effect.Effect<CachedTrust, DeterminationNotFound> =>
    Effect.clockWith((clock) => {
      // The hit (every warm read) is answered here, with no generator; a miss builds the document below.
      const hit = cache.get(publicId, clock.currentTimeMillisUnsafe())
      return hit !== undefined ? Effect.succeed(hit) : build(publicId)
    })

  const build: (publicId: PublicId) => Effect.Effect<CachedTrust, DeterminationNotFound> = Effect.fn("TrustResolver.build")(
    function*(publicId: PublicId) {
      const seen = cache.generation(publicId)
      const document = yield* load(publicId)
      const builtAtMs = yield* Clock.currentTimeMillis
      const next = nextFreshnessBoundary(builtAtMs, Date.parse(document.freshness.as_of), Date.parse(document.freshness.valid_until))
      const entry: CachedTrust = {
        document,
        builtAtMs,
        validUntilMs: document.lifecycle.state === "EXPIRED" || next === null ? Number.POSITIVE_INFINITY : next
      }
      cache.put(publicId, seen, entry)
      return entry
    }
  )

  const resolve = (publicId: PublicId): Effect.Effect<MachineTrustResponse, DeterminationNotFound> =>
    Effect.map(resolveCached(publicId), (entry) => entry.document)

  /**
   * The read itself only reads: it never opens a transaction or locks a row. When a freshness boundary
   * has passed that the chain has not announced yet, the document would show a state its event head does
   * not; the writer (Determinations) announces it in its own fiber, every reader of the id waits for that
   * one announcement, and the read reads again. So a document and the feed always agree, and the digest
   * moves once per transition.
   */
  const load = (publicId: PublicId): Effect.Effect<MachineTrustResponse, DeterminationNotFound> =>
    Effect.gen(function*() {
      let stored = yield* determinations.current(publicId)
      let now = yield* Clock.currentTimeMillis
      if (stored.freshness_due_ms !== null && stored.freshness_due_ms <= now) {
        yield* determinations.announceFreshness(publicId)
        stored = yield* determinations.current(publicId)
        now = yield* Clock.currentTimeMillis
      }
      // The head is read with the current version (one row), so the document and the feed agree.
      return buildMachineTrust(stored, policy.ref, stored.event_head, now)
    })

  const peek = (publicId: PublicId, nowMs: number): MachineTrustResponse | undefined => cache.get(publicId, nowMs)?.document

  return { resolve, resolveCached, peek } satisfies TrustResolverShape
})

/**
 * publicId → canonical trust document. Every surface (machine, human, MCP, receipts) resolves
 * through here, so they all see the same document and the same digest.
 */
export class TrustResolver extends Context.Service<TrustResolver, TrustResolverShape>()("pv/TrustResolver", { make }) {
  static readonly layerNoDeps = Layer.effect(TrustResolver, make)
  static readonly layer = TrustResolver.layerNoDeps.pipe(
    Layer.provide([Determinations.layer, Policy.layer, TrustCache.layer])
  )

  /**
   * The real resolver and cache over `Determinations.layerTest`: one change feed, so the writer's commits
   * evict this cache as in the server. Its dependencies stay in its output.
   */
  static readonly layerTest = TrustResolver.layerNoDeps.pipe(
    Layer.provideMerge(Layer.mergeAll(Policy.layer, TrustCache.layer)),
    Layer.provideMerge(Determinations.layerTest)
  )
}
