import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { decodeTime, encodeTime } from "ulid"
import { PublicId } from "../../src/domain/PublicId.js"
import { verifyEventChain } from "../../src/domain/EventVerify.js"
import { EventLog } from "../../src/events/EventLog.js"
import { privateKeyFromSeed, signerFromPrivateKey, testSigningSeed } from "../../src/events/Signer.js"
import { Determinations } from "../../src/trust/Determinations.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { overTestDatabase } from "../support/serviceDatabase.js"

/**
 * The real Determinations service in-process (Determinations.layerTest: the test signing key, deterministic
 * ids) over embedded PGlite, under @effect/vitest's TestClock: the writer's rules without HTTP.
 */
const T0 = Date.parse("2026-03-01T00:00:00.000Z")
// The public half of the fixed test key, derived here from its seed, not read from the service.
const testKey = signerFromPrivateKey(privateKeyFromSeed(testSigningSeed), "seed").jwk
const testKid = testKey.kid

const eventsOf = (publicId: PublicId) =>
  Effect.flatMap(EventLog, (log) => Effect.orDie(log.page(publicId, { limit: 100 })))

describe("Determinations (service, in-process)", () => {
  layer(overTestDatabase(Determinations.layerTest), { timeout: 120_000 })((it) => {
    it.effect("stores one version per change: created, unchanged for the same body, updated with the fields that changed", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const determinations = yield* Determinations
        const id = PublicId.make("DET-V1-SVC-VERSIONS")
        const body = determinationBody(T0 - DAY_MS, { subject: { subject_id: "sub_versions", physical_subject_id: "phys_v", identity_state: "VERIFIED" } })

        const created = yield* determinations.ingest(id, body)
        assert.strictEqual(created.outcome, "created")
        assert.strictEqual(created.version, 1)
        // The id is the test Ids' (the clock's instant, then a counter), so it is the same on every run.
        assert.match(created.determination_id, new RegExp(`^dv_${encodeTime(T0, 10)}0{14}[0-9A-Z]{2}$`))
        assert.strictEqual(decodeTime(created.determination_id.slice(3)), T0)

        yield* TestClock.adjust(1_000)
        const again = yield* determinations.ingest(id, body)
        assert.deepStrictEqual(again, { ...created, outcome: "unchanged", changed_fields: [] })

        const next = { ...body, tier: "T3" as const, limitations: ["Entity only", "No site visit"] }
        const updated = yield* determinations.ingest(id, next)
        assert.strictEqual(updated.outcome, "updated")
        assert.strictEqual(updated.version, 2)
        assert.deepStrictEqual(updated.changed_fields, ["limitations", "tier"])
        assert.notStrictEqual(updated.determination_id, created.determination_id)

        // The current version is the last stored one, recorded at the clock's instant.
        const current = yield* determinations.current(id)
        assert.strictEqual(current.version, 2)
        assert.strictEqual(current.determination_id, updated.determination_id)
        assert.strictEqual(current.recorded_at, new Date(T0 + 1_000).toISOString())
        assert.deepStrictEqual(current.body, next)

        // One event per stored change, none for the unchanged body.
        const page = yield* eventsOf(id)
        assert.deepStrictEqual(page.events.map((e) => [e.sequence, e.type, e.payload.version]), [
          [1, "determination.recorded", 1],
          [2, "determination.updated", 2]
        ])
        assert.strictEqual(current.event_head.sequence, 2)
      }))

    it.effect("a lifecycle change is one lifecycle.changed event; the chain verifies under the test signing key", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const determinations = yield* Determinations
        const id = PublicId.make("DET-V1-SVC-LIFECYCLE")
        const body = determinationBody(T0 - DAY_MS, { subject: { subject_id: "sub_lifecycle", physical_subject_id: "phys_l", identity_state: "VERIFIED" } })
        yield* determinations.ingest(id, body)
        const active = yield* determinations.ingest(id, { ...body, lifecycle_state: "ACTIVE", tier: "T3" })
        assert.deepStrictEqual(active.changed_fields, ["lifecycle_state", "tier"])

        const page = yield* eventsOf(id)
        assert.deepStrictEqual(page.events.map((e) => e.type), ["determination.recorded", "lifecycle.changed"])
        assert.deepStrictEqual(page.events[1]!.payload, {
          determination_id: active.determination_id,
          version: 2,
          determination_digest: active.determination_digest,
          previous_lifecycle_state: "NOT_ISSUED",
          lifecycle_state: "ACTIVE",
          changed_fields: ["lifecycle_state", "tier"],
          freshness_state: "CURRENT"
        })
        const jwks = yield* Effect.flatMap(EventLog, (log) => log.jwks)
        assert.deepStrictEqual(jwks.keys.map((k) => k.kid), [testKid])
        for (const event of page.events) assert.strictEqual(event.signature.kid, testKid)
        const verdict = verifyEventChain(page.events, { keys: [testKey] })
        assert.isTrue(verdict.ok, JSON.stringify(verdict))
        assert.strictEqual(verdict.ok && verdict.count, 2)
      }))

    it.effect("the sweep announces each freshness state time enters once, effective at its boundary, not at the sweep", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const determinations = yield* Determinations
        const id = PublicId.make("DET-V1-SVC-SWEEP")
        const asOf = T0 - DAY_MS
        // w = 100 days: APPROACHING_STALE from as_of + 80 days, STALE from as_of + 100 days.
        yield* determinations.ingest(id, determinationBody(asOf, { subject: { subject_id: "sub_sweep", physical_subject_id: "phys_s", identity_state: "VERIFIED" } }))
        yield* determinations.sweepOnce
        assert.strictEqual((yield* determinations.current(id)).event_head.sequence, 1)

        yield* TestClock.setTime(asOf + 80 * DAY_MS - 1)
        yield* determinations.sweepOnce
        assert.strictEqual((yield* determinations.current(id)).event_head.sequence, 1)

        // Past two boundaries at once: one event per state entered, in order.
        yield* TestClock.setTime(asOf + 100 * DAY_MS + 5 * 60_000)
        yield* determinations.sweepOnce
        assert.strictEqual(yield* determinations.sweepOnce, 0)
        const page = yield* eventsOf(id)
        const determinationId = page.events[0]!.payload.determination_id!
        assert.deepStrictEqual(page.events.slice(1).map((e) => [e.type, e.payload]), [
          ["freshness.changed", {
            determination_id: determinationId,
            previous_freshness_state: "CURRENT",
            freshness_state: "APPROACHING_STALE",
            effective_at: new Date(asOf + 80 * DAY_MS).toISOString()
          }],
          ["freshness.changed", {
            determination_id: determinationId,
            previous_freshness_state: "APPROACHING_STALE",
            freshness_state: "STALE",
            effective_at: new Date(asOf + 100 * DAY_MS).toISOString()
          }]
        ])
        // Stamped when announced, by the clock of the sweep.
        assert.strictEqual(page.events[2]!.occurred_at, new Date(asOf + 100 * DAY_MS + 5 * 60_000).toISOString())
        // The next transition to announce is EXPIRED, at valid_until + w.
        assert.strictEqual((yield* determinations.current(id)).freshness_due_ms, asOf + 200 * DAY_MS)
      }))

    it.effect("finds the current version of every determination of a subject, and none for an unknown id", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const determinations = yield* Determinations
        const subject = { subject_id: "sub_two", physical_subject_id: "phys_two", identity_state: "VERIFIED" as const }
        const first = PublicId.make("DET-V1-SVC-SUBJECT-A")
        const second = PublicId.make("QUAL-V1-SVC-SUBJECT-B")
        yield* determinations.ingest(first, determinationBody(T0, { subject }))
        yield* determinations.ingest(second, determinationBody(T0, { subject, tier: "T1" }))
        yield* determinations.ingest(second, determinationBody(T0, { subject, tier: "T3" }))

        const found = yield* determinations.bySubject("sub_two")
        assert.deepStrictEqual(found.map((d) => [d.public_id, d.version, d.body.tier]).sort(), [
          [first, 1, "T2"],
          [second, 2, "T3"]
        ])
        assert.deepStrictEqual(yield* determinations.bySubject("sub_nobody"), [])

        const missing = yield* Effect.flip(determinations.current(PublicId.make("DET-V1-SVC-NOBODY")))
        assert.strictEqual(missing._tag, "DeterminationNotFound")
      }))
  })
})
