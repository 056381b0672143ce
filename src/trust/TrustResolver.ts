import { Clock, Effect } from "effect"
import { buildMachineTrust, type MachineTrustResponse } from "../domain/MachineTrust.js"
import { nextFreshnessBoundary } from "./Freshness.js"
import { type CachedTrust, TrustCache } from "./TrustCache.js"
import type { DeterminationNotFound, InvalidPublicId } from "../domain/Problem.js"
import { EventLog } from "../events/EventLog.js"
import { Policy } from "../receipts/Policy.js"
import { Determinations } from "./Determinations.js"

/**
 * publicId → canonical trust document. Every surface (machine, human, MCP, receipts) resolves
 * through here, so they all see the same document and the same digest.
 */
export class TrustResolver extends Effect.Service<TrustResolver>()("pv/TrustResolver", {
  effect: Effect.gen(function*() {
    const determinations = yield* Determinations
    const policy = yield* Policy
    const events = yield* EventLog
    const cache = yield* TrustCache

    /** The document and its serialised form, from the cache when it is still exact. */
    const resolveCached = (publicId: string): Effect.Effect<CachedTrust, InvalidPublicId | DeterminationNotFound> =>
      Effect.gen(function*() {
        const hit = cache.get(publicId, yield* Clock.currentTimeMillis)
        if (hit !== undefined) return hit
        const seen = cache.generation(publicId)
        const document = yield* load(publicId)
        const builtAtMs = yield* Clock.currentTimeMillis
        const next = nextFreshnessBoundary(builtAtMs, Date.parse(document.freshness.as_of), Date.parse(document.freshness.valid_until))
        const entry: CachedTrust = {
          document,
          json: JSON.stringify(document),
          builtAtMs,
          validUntilMs: document.lifecycle.state === "EXPIRED" || next === null ? Number.POSITIVE_INFINITY : next
        }
        cache.put(publicId, seen, entry)
        return entry
      })

    const resolve = (publicId: string): Effect.Effect<MachineTrustResponse, InvalidPublicId | DeterminationNotFound> =>
      Effect.map(resolveCached(publicId), (entry) => entry.document)

    const load = (publicId: string): Effect.Effect<MachineTrustResponse, InvalidPublicId | DeterminationNotFound> =>
      Effect.gen(function*() {
        let stored = yield* determinations.current(publicId)
        let now = yield* Clock.currentTimeMillis
        if (stored.freshness_due_ms !== null && stored.freshness_due_ms <= now) {
          // A boundary passed and the sweep has not announced it yet: announce it first, so a document
          // never shows a freshness state its event head does not, and its digest moves once per transition.
          yield* events.announceFreshness(stored.public_id)
          stored = yield* determinations.current(publicId)
          now = yield* Clock.currentTimeMillis
        }
        // The head is read with the current version (one row), so the document and the feed agree.
        return buildMachineTrust(stored, policy.ref, stored.event_head, now)
      })

    return { resolve, resolveCached } as const
  }),
  dependencies: [Determinations.Default, Policy.Default, EventLog.Default, TrustCache.Default]
}) {}
