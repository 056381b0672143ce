import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { decodeTime } from "ulid"
import { digestOf } from "../../src/domain/Canonical.js"
import type { DeterminationBody, StoredDetermination } from "../../src/domain/Determination.js"
import {
  buildMachineTrust,
  type EventHead,
  type MachineTrustResponse,
  type PolicyRef,
  trustStateDigestOf
} from "../../src/domain/MachineTrust.js"
import { Ids } from "../../src/platform/Ids.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"

const asOf = Date.parse("2030-01-01T00:00:00.000Z")
const policy: PolicyRef = { policy_id: "pv-reliance-policy", policy_version: "1.0.0", policy_digest: "b".repeat(64) }
const head: EventHead = { sequence: 0, eventHash: null }

const stored = (body: DeterminationBody, determinationId = "dv_01J0000000000000000000000A"): StoredDetermination => ({
  public_id: "DET-V1-UNIT-0001",
  determination_id: determinationId,
  version: 1,
  body,
  determination_digest: digestOf(body),
  evidence_digest: digestOf(body.evidence),
  recorded_at: new Date(asOf).toISOString()
})

const baseBody = determinationBody(asOf)
const build = (body: DeterminationBody = baseBody, nowMs = asOf, p: PolicyRef = policy, h: EventHead = head) =>
  buildMachineTrust(stored(body), p, h, nowMs)

/** What a client does: take the JSON it received, drop trust_state_digest, JCS + SHA-256 the rest. */
const clientDigest = (document: MachineTrustResponse): string => {
  const received = JSON.parse(JSON.stringify(document)) as Record<string, unknown>
  delete received.trust_state_digest
  return digestOf(received)
}

/** The same value with the keys of every object in reverse order. */
const reversedKeys = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(reversedKeys)
  if (value === null || typeof value !== "object") return value
  return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reversedKeys(v)]))
}

/** One change per top-level field of the ingestion body, each a realistic operator edit. */
const bodyEdits: ReadonlyArray<readonly [string, (b: DeterminationBody) => DeterminationBody]> = [
  ["subject", (b) => ({ ...b, subject: { ...b.subject, identity_state: "UNVERIFIED" } })],
  ["tier", (b) => ({ ...b, tier: "T3" })],
  ["eligible", (b) => ({ ...b, eligible: !b.eligible })],
  ["why_this_tier", (b) => ({ ...b, why_this_tier: [...b.why_this_tier, "Audit passed"] })],
  ["why_not_higher", (b) => ({ ...b, why_not_higher: [] })],
  ["claims", (b) => ({ ...b, claims: [{ ...b.claims[0]!, value: "Test Co Ltd" }] })],
  ["evidence", (b) => ({ ...b, evidence: [{ ...b.evidence[0]!, digest: "c".repeat(64) }] })],
  ["allowed_claims", (b) => ({ ...b, allowed_claims: ["identity"] })],
  ["limitations", (b) => ({ ...b, limitations: [...b.limitations, "No financial assurance"] })],
  ["prohibited_inferences", (b) => ({ ...b, prohibited_inferences: [] })],
  ["lifecycle_state", (b) => ({ ...b, lifecycle_state: "ACTIVE" })],
  ["as_of", (b) => ({ ...b, as_of: new Date(asOf - 1).toISOString() })],
  ["valid_until", (b) => ({ ...b, valid_until: new Date(Date.parse(b.valid_until) + 1).toISOString() })],
  ["engine", (b) => ({ ...b, engine: { ...b.engine, version: "1.0.1" } })],
  ["purchase", (b) => ({ ...b, purchase: { order: "po-1" } })]
]

describe("buildMachineTrust", () => {
  it("builds the document of docs/API.md §6 and a trust_state_digest a client can recompute", () => {
    const document = build()
    expect(Object.keys(document).sort()).toEqual([
      "allowed_claims", "authority", "claims", "determination", "engine", "evidence", "freshness", "integrity",
      "lifecycle", "limitations", "policy", "prohibited_inferences", "purchase", "schema", "subject", "trust_state_digest"
    ])
    expect(document.schema).toBe("pv.machine-trust.v1")
    expect(document.trust_state_digest).toMatch(/^[0-9a-f]{64}$/)
    expect(document.trust_state_digest).toBe(trustStateDigestOf(document))
    expect(document.trust_state_digest).toBe(clientDigest(document))
    expect(document.determination).toEqual({
      tier: "T2",
      determination_id: "dv_01J0000000000000000000000A",
      determination_digest: digestOf(baseBody),
      eligible: true,
      why_this_tier: baseBody.why_this_tier,
      why_not_higher: baseBody.why_not_higher
    })
    expect(document.authority).toEqual({
      issuance_authorized: false, authority_state: "NOT_AUTHORIZED", authoritative_state: "NOT_AUTHORIZED", signing_key_count: 0
    })
    expect(document.integrity).toEqual({
      canonicalization: "RFC8785",
      digest_algorithm: "sha-256",
      determination_digest: digestOf(baseBody),
      evidence_digest: digestOf(baseBody.evidence),
      event_head: { sequence: 0, eventHash: null }
    })
    expect(document.freshness).toEqual({ state: "CURRENT", as_of: baseBody.as_of, valid_until: baseBody.valid_until })
    expect(document.lifecycle).toEqual({ state: "NOT_ISSUED" })
    expect(document.policy).toEqual(policy)
    expect(document.engine).toEqual(baseBody.engine)
    expect(document.purchase).toEqual({})
    expect(document.subject).toEqual(baseBody.subject)
    expect(document.claims).toEqual(baseBody.claims)
    expect(document.evidence).toEqual(baseBody.evidence)
  })

  it("carries the record's purchase object", () => {
    const document = build({ ...baseBody, purchase: { order_id: "po-7", seats: 3 } })
    expect(document.purchase).toEqual({ order_id: "po-7", seats: 3 })
    expect(document.trust_state_digest).not.toBe(build().trust_state_digest)
  })

  it("reports freshness EXPIRED whenever the lifecycle is EXPIRED", () => {
    const document = build({ ...baseBody, lifecycle_state: "EXPIRED" })
    expect(document.freshness.state).toBe("EXPIRED")
    expect(document.lifecycle.state).toBe("EXPIRED")
  })

  it("gives the same digest for the same record, policy, event head and freshness state", () => {
    expect(build()).toEqual(build())
    expect(build().trust_state_digest).toBe(build(structuredClone(baseBody)).trust_state_digest)
  })

  it("does not depend on the key order of the stored body", () => {
    const reordered = reversedKeys(baseBody) as DeterminationBody
    expect(Object.keys(reordered)).not.toEqual(Object.keys(baseBody))
    expect(build(reordered).trust_state_digest).toBe(build().trust_state_digest)
  })

  // valid_until = as_of + 100 d: CURRENT until as_of + 80 d.
  it("has no per-request fields: any instant in one freshness state gives the same document", () => fc.assert(fc.property(
    fc.integer({ min: asOf - 30 * DAY_MS, max: asOf + 80 * DAY_MS - 1 }),
    fc.integer({ min: asOf - 30 * DAY_MS, max: asOf + 80 * DAY_MS - 1 }), (t1, t2) => {
    expect(build(baseBody, t1)).toEqual(build(baseBody, t2))
  })))

  it("changes the digest exactly when time crosses a freshness boundary", () => {
    const instants = [asOf + 80 * DAY_MS - 1, asOf + 80 * DAY_MS, asOf + 100 * DAY_MS, asOf + 200 * DAY_MS]
    const documents = instants.map((t) => build(baseBody, t))
    expect(documents.map((d) => d.freshness.state)).toEqual(["CURRENT", "APPROACHING_STALE", "STALE", "EXPIRED"])
    expect(new Set(documents.map((d) => d.trust_state_digest)).size).toBe(4)
    for (const d of documents) expect(d.trust_state_digest).toBe(clientDigest(d))
    expect(build(baseBody, asOf + 100 * DAY_MS - 1).trust_state_digest).toBe(documents[1]!.trust_state_digest)
    expect(build(baseBody, asOf + 200 * DAY_MS - 1).trust_state_digest).toBe(documents[2]!.trust_state_digest)
  })

  it("changes the digest when any field of the record changes", () => {
    const original = build().trust_state_digest
    const seen = new Set([original])
    for (const [field, edit] of bodyEdits) {
      const edited = build(edit(baseBody))
      expect(edited.trust_state_digest, field).not.toBe(original)
      expect(edited.trust_state_digest, field).toBe(clientDigest(edited))
      seen.add(edited.trust_state_digest)
    }
    expect(seen.size).toBe(bodyEdits.length + 1)
  })

  it("changes the digest with the stored version, the policy and the event head", () => {
    const original = build().trust_state_digest
    const variants = [
      buildMachineTrust(stored(baseBody, "dv_01J0000000000000000000000B"), policy, head, asOf),
      build(baseBody, asOf, { ...policy, policy_version: "1.0.1" }),
      build(baseBody, asOf, { ...policy, policy_id: "other" }),
      build(baseBody, asOf, { ...policy, policy_digest: "c".repeat(64) }),
      build(baseBody, asOf, policy, { sequence: 1, eventHash: "d".repeat(64) }),
      build(baseBody, asOf, policy, { sequence: 2, eventHash: "d".repeat(64) })
    ].map((d) => d.trust_state_digest)
    expect(variants).not.toContain(original)
    expect(new Set(variants).size).toBe(variants.length)
  })

  it("detects a change to any value of the document", () => fc.assert(fc.property(fc.nat(), fc.constantFrom("x", 7, true, null), (pick, replacement) => {
    const document = build()
    const paths: Array<ReadonlyArray<string | number>> = []
    const walk = (value: unknown, path: Array<string | number>) => {
      if (Array.isArray(value)) value.forEach((v, i) => walk(v, [...path, i]))
      else if (value !== null && typeof value === "object") {
        for (const [k, v] of Object.entries(value)) if (k !== "trust_state_digest") walk(v, [...path, k])
      } else paths.push(path)
    }
    walk(document, [])
    const path = paths[pick % paths.length]!
    const tampered = JSON.parse(JSON.stringify(document))
    let target = tampered
    for (const key of path.slice(0, -1)) target = target[key]
    fc.pre(target[path.at(-1)!] !== replacement)
    target[path.at(-1)!] = replacement
    expect(trustStateDigestOf(tampered)).not.toBe(document.trust_state_digest)
  })))
})

describe("determination ids (Ids service on the test clock)", () => {
  it.effect("stamps dv_ ULIDs with the clock's time, so later versions sort later", () =>
    Effect.gen(function*() {
      const ids = yield* Ids
      yield* TestClock.setTime(asOf)
      const first = yield* ids.make("dv")
      yield* TestClock.adjust("1 millis")
      const second = yield* ids.make("dv")
      yield* TestClock.adjust("3 days")
      const third = yield* ids.make("dv")
      for (const id of [first, second, third]) expect(id).toMatch(/^dv_[0-9A-HJKMNP-TV-Z]{26}$/)
      expect([first, second, third].map((id) => decodeTime(id.slice(3)))).toEqual([asOf, asOf + 1, asOf + 1 + 3 * DAY_MS])
      expect([third, first, second].sort()).toEqual([first, second, third])
    }).pipe(Effect.provide(Ids.layer)))
})
