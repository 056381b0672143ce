import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { digestOf } from "../../src/domain/Canonical.js"
import type { DeterminationBody } from "../../src/domain/Determination.js"
import { PublicId } from "../../src/domain/PublicId.js"
import { EventLog } from "../../src/events/EventLog.js"
import { Determinations } from "../../src/trust/Determinations.js"
import { TrustResolver } from "../../src/trust/TrustResolver.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { overTestDatabase } from "../support/serviceDatabase.js"

/**
 * The real TrustResolver and its cache in-process (TrustResolver.layerTest over Determinations.layerTest)
 * on embedded PGlite, with @effect/vitest's TestClock: time only moves when a test moves it, so every
 * answer below is either the cached document or a rebuilt one for a reason the test names.
 */
const T0 = Date.parse("2026-03-01T00:00:00.000Z")

const bodyFor = (name: string, asOfMs: number, overrides: Partial<DeterminationBody> = {}) =>
  determinationBody(asOfMs, { subject: { subject_id: `sub_${name}`, physical_subject_id: `phys_${name}`, identity_state: "VERIFIED" }, ...overrides })

const freshnessEvents = (publicId: PublicId) =>
  Effect.flatMap(EventLog, (log) => Effect.orDie(log.page(publicId, { limit: 100 }))).pipe(
    Effect.map((page) => page.events.filter((e) => e.type === "freshness.changed").map((e) => [e.payload.freshness_state, e.payload.effective_at]))
  )

describe("TrustResolver (service, in-process)", () => {
  layer(overTestDatabase(TrustResolver.layerTest), { timeout: 120_000 })((it) => {
    it.effect("serves the cached document until the freshness boundary, then the next state with its announced event", () =>
      Effect.gen(function*() {
        const resolver = yield* TrustResolver
        const id = PublicId.make("DET-V1-SVC-BOUNDARY")
        const asOf = T0 - DAY_MS
        // w = 100 days: APPROACHING_STALE from as_of + 80 days.
        const boundary = asOf + 80 * DAY_MS
        yield* TestClock.setTime(T0)
        yield* Effect.flatMap(Determinations, (d) => d.ingest(id, bodyFor("boundary", asOf)))

        yield* TestClock.setTime(boundary - 3_000)
        const before = yield* resolver.resolve(id)
        assert.strictEqual(before.freshness.state, "CURRENT")
        assert.strictEqual(before.integrity.event_head.sequence, 1)

        // 1 ms before the boundary: the very same cached document.
        yield* TestClock.setTime(boundary - 1)
        assert.strictEqual(yield* resolver.resolve(id), before)
        assert.strictEqual(resolver.peek(id, boundary - 1), before)
        assert.isUndefined(resolver.peek(id, boundary))

        // At the boundary: the next state, announced on the feed first, so the document names that event.
        yield* TestClock.setTime(boundary)
        const after = yield* resolver.resolve(id)
        assert.strictEqual(after.freshness.state, "APPROACHING_STALE")
        assert.notStrictEqual(after.trust_state_digest, before.trust_state_digest)
        assert.strictEqual(after.integrity.event_head.sequence, 2)
        assert.deepStrictEqual(yield* freshnessEvents(id), [["APPROACHING_STALE", new Date(boundary).toISOString()]])

        // The digest moves once per transition: later reads in the same state agree, and announce nothing more.
        yield* TestClock.setTime(boundary + 10_000)
        const later = yield* resolver.resolve(id)
        assert.strictEqual(later.trust_state_digest, after.trust_state_digest)
        assert.strictEqual(later.integrity.event_head.sequence, 2)
      }))

    it.effect("readers that meet two passed boundaries at once share one announcement and all see its head", () =>
      Effect.gen(function*() {
        const resolver = yield* TrustResolver
        const id = PublicId.make("DET-V1-SVC-READERS")
        const asOf = T0 - DAY_MS
        yield* TestClock.setTime(T0)
        yield* Effect.flatMap(Determinations, (d) => d.ingest(id, bodyFor("readers", asOf)))
        assert.strictEqual((yield* resolver.resolve(id)).freshness.state, "CURRENT")

        // Past APPROACHING_STALE and STALE (valid_until = as_of + 100 days) before anything was announced.
        yield* TestClock.setTime(asOf + 100 * DAY_MS + 1)
        const documents = yield* Effect.all(Array.from({ length: 8 }, () => resolver.resolve(id)), { concurrency: "unbounded" })
        assert.deepStrictEqual(new Set(documents.map((d) => d.trust_state_digest)).size, 1)
        for (const document of documents) {
          assert.strictEqual(document.freshness.state, "STALE")
          assert.strictEqual(document.integrity.event_head.sequence, 3)
        }
        assert.deepStrictEqual(yield* freshnessEvents(id), [
          ["APPROACHING_STALE", new Date(asOf + 80 * DAY_MS).toISOString()],
          ["STALE", new Date(asOf + 100 * DAY_MS).toISOString()]
        ])
      }))

    it.effect("reads its own writes with the clock standing still: a change evicts the cached document at once", () =>
      Effect.gen(function*() {
        const resolver = yield* TrustResolver
        const determinations = yield* Determinations
        const id = PublicId.make("DET-V1-SVC-OWN-WRITES")
        yield* TestClock.setTime(T0)
        const body = bodyFor("own", T0 - DAY_MS)
        yield* determinations.ingest(id, body)
        const first = yield* resolver.resolve(id)
        assert.strictEqual(yield* resolver.resolve(id), first)

        const changed = yield* determinations.ingest(id, { ...body, tier: "T3" })
        const second = yield* resolver.resolve(id)
        assert.strictEqual(second.determination.tier, "T3")
        assert.strictEqual(second.determination.determination_id, changed.determination_id)
        assert.strictEqual(second.determination.determination_digest, digestOf({ ...body, tier: "T3" }))
        assert.strictEqual(second.integrity.event_head.sequence, 2)
        assert.notStrictEqual(second.trust_state_digest, first.trust_state_digest)
      }))

    it.effect("answers determination-not-found for an unknown id, and caches nothing for it", () =>
      Effect.gen(function*() {
        const resolver = yield* TrustResolver
        const id = PublicId.make("DET-V1-SVC-LATE")
        yield* TestClock.setTime(T0)
        const missing = yield* Effect.flip(resolver.resolve(id))
        assert.strictEqual(missing._tag, "DeterminationNotFound")
        yield* Effect.flatMap(Determinations, (d) => d.ingest(id, bodyFor("late", T0 - DAY_MS)))
        assert.strictEqual((yield* resolver.resolve(id)).determination.tier, "T2")
      }))
  })
})
