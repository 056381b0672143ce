import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import canonicalize from "canonicalize"
import { Result, Schema } from "effect"
import * as fc from "fast-check"
import {
  type MachineTrustResponse,
  receiptDigestOf,
  trustStateDigestOf as exportedTrustDigest,
  verifyReceipt,
  verifyReceiptDigest
} from "../../src/client/index.js"
import { canonicalJson } from "../../src/domain/Canonical.js"
import {
  decodeRelianceRequest,
  ProhibitedRequestFields,
  RelianceRequest,
  ReceiptSnapshot,
  ReceiptSchemaId,
  type RelianceReceipt,
  sealReceipt
} from "../../src/domain/Receipt.js"
import { evaluateActionability } from "../../src/receipts/Actionability.js"
import { actionRule, claimScope, policyWith, request, shippedPolicy, trustDocument } from "./arbitraries.js"

/** Snapshots as the service builds them: an evaluation of a generated document, plus id, time and schema. */
const snapshot: fc.Arbitrary<ReceiptSnapshot> = fc.tuple(
  trustDocument,
  actionRule,
  claimScope,
  fc.date({ min: new Date("2030-01-01T00:00:00Z"), max: new Date("2040-01-01T00:00:00Z"), noInvalidDate: true }),
  fc.stringMatching(/^[0-9A-HJKMNP-TV-Z]{26}$/)
).map(([trust, rule, scope, at, ulid]) => ({
  schema: ReceiptSchemaId,
  receipt_id: `rr_${ulid}`,
  created_at: at.toISOString(),
  ...Result.getOrThrow(evaluateActionability(trust, policyWith(rule), request("test-purpose", "test-action", scope)))
}))

/** What docs/API.md §9.4 says a client computes, without the service's helpers: SHA-256 of the RFC 8785 text. */
const independentDigest = (value: unknown) => createHash("sha256").update(canonicalize(value)!, "utf8").digest("hex")

/** A JSON value other than `current`, for replacing one snapshot field. */
const otherValue = (current: unknown) =>
  fc.oneof(
    fc.string({ maxLength: 20 }),
    fc.boolean(),
    fc.constant(null),
    fc.integer(),
    fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
    typeof current === "string" ? fc.string({ minLength: 1, maxLength: 3 }).map((s) => current + s) : fc.constant(null)
  ).filter((value) => independentDigest(value) !== independentDigest(current))

/** docs/API.md §9.2: the receipt's fields, every one of them covered by receipt_digest. */
const documentedSnapshotFields = [
  "schema", "receipt_id", "created_at", "tenant_id", "organization", "principal", "subject_public_id", "purpose_id",
  "requested_action", "claim_scope", "determination_id", "determination_digest", "trust_state_digest",
  "policy_version", "policy_digest", "tier", "lifecycle_state", "freshness_state", "decision", "verdicts",
  "authority_state", "credential_state"
] as const

/** A snapshot, one of its fields and a different value for it, generated together (no sampling inside a property). */
const snapshotWithReplacement = snapshot.chain((snap) =>
  fc.constantFrom(...documentedSnapshotFields).chain((field) =>
    otherValue((snap as Record<string, unknown>)[field]).map((replacement) => ({ snap, field, replacement }))))

/**
 * A known vector, written by hand: a snapshot, its RFC 8785 text (members sorted by UTF-16 code units, no white
 * space, only quotation mark, backslash and control characters escaped, non-ASCII kept as UTF-8) and that text's SHA-256.
 */
const D = (c: string) => c.repeat(64)
const vectorSnapshot = {
  schema: "pv-reliance-receipt-v1",
  receipt_id: "rr_01J9ZQ4V8K6T3M2N5P7R9S1T4W",
  created_at: "2031-03-05T09:30:00.000Z",
  tenant_id: "tenant-a",
  organization: "Acme Procurement – Zürich",
  principal: "agent:buyer-7 \"night\"\tshift",
  subject_public_id: "DET-V1-ACME-ROBOTICS-0001",
  purpose_id: "supplier-onboarding",
  requested_action: "screen",
  claim_scope: ["identity", "assurance"],
  determination_id: "dv_01J9ZQ0000000000000000000A",
  determination_digest: D("1"),
  trust_state_digest: D("2"),
  policy_version: "2026-01",
  policy_digest: D("3"),
  tier: "T3",
  lifecycle_state: "NOT_ISSUED",
  freshness_state: "CURRENT",
  decision: "ACTIONABLE",
  verdicts: [
    { check: "freshness", outcome: "PASS", reason: "CURRENT" },
    { check: "lifecycle", outcome: "PASS", reason: "NOT_ISSUED" },
    { check: "authority", outcome: "PASS", reason: "no issued credential required" },
    { check: "tier", outcome: "PASS", reason: "T3 >= T2" },
    { check: "eligibility", outcome: "PASS", reason: "eligible" },
    { check: "claim_scope", outcome: "PASS", reason: "identity, assurance allowed" }
  ],
  authority_state: "ISSUANCE_NOT_AUTHORIZED",
  credential_state: "NOT_ISSUED"
} as const satisfies ReceiptSnapshot
const vectorJcs =
  `{"authority_state":"ISSUANCE_NOT_AUTHORIZED","claim_scope":["identity","assurance"],` +
  `"created_at":"2031-03-05T09:30:00.000Z","credential_state":"NOT_ISSUED","decision":"ACTIONABLE",` +
  `"determination_digest":"${D("1")}","determination_id":"dv_01J9ZQ0000000000000000000A",` +
  `"freshness_state":"CURRENT","lifecycle_state":"NOT_ISSUED","organization":"Acme Procurement – Zürich",` +
  `"policy_digest":"${D("3")}","policy_version":"2026-01","principal":"agent:buyer-7 \\"night\\"\\tshift",` +
  `"purpose_id":"supplier-onboarding","receipt_id":"rr_01J9ZQ4V8K6T3M2N5P7R9S1T4W","requested_action":"screen",` +
  `"schema":"pv-reliance-receipt-v1","subject_public_id":"DET-V1-ACME-ROBOTICS-0001","tenant_id":"tenant-a",` +
  `"tier":"T3","trust_state_digest":"${D("2")}","verdicts":[` +
  `{"check":"freshness","outcome":"PASS","reason":"CURRENT"},{"check":"lifecycle","outcome":"PASS","reason":"NOT_ISSUED"},` +
  `{"check":"authority","outcome":"PASS","reason":"no issued credential required"},{"check":"tier","outcome":"PASS","reason":"T3 >= T2"},` +
  `{"check":"eligibility","outcome":"PASS","reason":"eligible"},{"check":"claim_scope","outcome":"PASS","reason":"identity, assurance allowed"}]}`
const vectorDigest = createHash("sha256").update(vectorJcs, "utf8").digest("hex")

describe("receipt digests", () => {
  it("the service's receipt schema and its evaluation hold exactly the receipt fields of docs/API.md §9.2", () => {
    // What the service encodes a snapshot with...
    expect(Object.keys(ReceiptSnapshot.fields).sort()).toEqual([...documentedSnapshotFields].sort())
    // ...and what its evaluation produces (Receipts.create adds schema, receipt_id and created_at to it).
    const [trust] = fc.sample(trustDocument, { numRuns: 1, seed: 3 })
    const evaluation = Result.getOrThrow(evaluateActionability(trust!, shippedPolicy, request("supplier-onboarding", "screen", ["identity"])))
    expect(Object.keys(evaluation).sort())
      .toEqual(documentedSnapshotFields.filter((f) => !["schema", "receipt_id", "created_at"].includes(f)).sort())
  })

  it("matches a hand-written RFC 8785 vector", () => {
    // The vector itself: its SHA-256, also computed with Python's json (sort_keys, no white space) and hashlib.
    expect(vectorDigest).toBe("315a4524933552b67e93118b8080d099d1342040cbbe4bc1709fae516050b274")
    expect(canonicalJson(vectorSnapshot)).toBe(vectorJcs)
    const sealed = sealReceipt(vectorSnapshot)
    expect(sealed.receipt_digest).toBe(vectorDigest)
    expect(sealed.snapshot_payload).toEqual(vectorSnapshot)
    expect(receiptDigestOf(vectorSnapshot)).toBe(vectorDigest)
    // Member order never matters; a client holding the stored digest verifies the parsed JSON.
    const reordered = JSON.parse(JSON.stringify(Object.fromEntries(Object.entries(vectorSnapshot).reverse())))
    expect(verifyReceiptDigest({ snapshot_payload: reordered, receipt_digest: vectorDigest })).toBe(true)
    const wrong = (vectorDigest[0] === "0" ? "1" : "0") + vectorDigest.slice(1)
    expect(verifyReceiptDigest({ snapshot_payload: reordered, receipt_digest: wrong })).toBe(false)
    expect(verifyReceiptDigest({ snapshot_payload: { ...reordered, principal: "agent:buyer-7" }, receipt_digest: vectorDigest })).toBe(false)
  })

  it("verify: receipt_digest is SHA-256 over the JCS form of snapshot_payload", () => fc.assert(fc.property(snapshot, (snap) => {
    const receipt = sealReceipt(snap)
    expect(receipt.receipt_digest).toMatch(/^[0-9a-f]{64}$/)
    expect(receipt.receipt_digest).toBe(independentDigest(snap))
    // A client sees JSON: keys in any order must not matter.
    const received = JSON.parse(JSON.stringify({
      ...receipt,
      snapshot_payload: Object.fromEntries(Object.entries(receipt.snapshot_payload).reverse())
    })) as RelianceReceipt
    expect(verifyReceiptDigest(received)).toBe(true)
    expect(verifyReceipt(received)).toBe(true)
    const { snapshot_payload: _s, receipt_digest: _d, ...topLevel } = receipt
    expect(topLevel).toEqual(receipt.snapshot_payload)
  })))

  it("change when any snapshot field changes", () => fc.assert(fc.property(snapshotWithReplacement, ({ field, replacement, snap }) => {
    const changed = { ...snap, [field]: replacement } as ReceiptSnapshot
    const original = sealReceipt(snap)
    // The stored digest no longer verifies the edited snapshot...
    expect(verifyReceiptDigest({ ...original, snapshot_payload: changed })).toBe(false)
    // ...and sealing the edited snapshot gives another digest.
    expect(sealReceipt(changed).receipt_digest).not.toBe(original.receipt_digest)
  }), { numRuns: 500 }))

  it("verifyReceipt catches a top-level field that disagrees with the snapshot", () => fc.assert(fc.property(snapshotWithReplacement, ({ field, replacement, snap }) => {
    const receipt = sealReceipt(snap)
    const tampered = { ...receipt, [field]: replacement } as unknown as RelianceReceipt
    expect(verifyReceiptDigest(tampered)).toBe(true)
    expect(verifyReceipt(tampered)).toBe(false)
  })))

  it("the client package's trust digest recipe matches a hand-written vector", () => {
    // trust_state_digest = SHA-256 of the JCS of the document without trust_state_digest (docs/API.md §6.3).
    const document = { tier: "T2", schema: "pv.machine-trust.v1", trust_state_digest: "f".repeat(64), authority: { issuance: "NOT_AUTHORIZED" } }
    const text = `{"authority":{"issuance":"NOT_AUTHORIZED"},"schema":"pv.machine-trust.v1","tier":"T2"}`
    const expected = createHash("sha256").update(text, "utf8").digest("hex")
    expect(exportedTrustDigest(document as unknown as MachineTrustResponse)).toBe(expected)
    expect(exportedTrustDigest({ ...document, trust_state_digest: "0".repeat(64) } as unknown as MachineTrustResponse)).toBe(expected)
    expect(exportedTrustDigest({ ...document, tier: "T3" } as unknown as MachineTrustResponse)).not.toBe(expected)
  })

  it("the client package's trust digest agrees with an independent computation and with the built document", () => fc.assert(fc.property(trustDocument, (trust) => {
    const { trust_state_digest, ...rest } = trust
    expect(exportedTrustDigest(trust)).toBe(independentDigest(rest))
    expect(trust_state_digest).toBe(independentDigest(rest))
  })))
})

const validBody = {
  tenant_id: "tenant-a",
  organization: "Acme Procurement",
  principal: "agent:buyer-7",
  subject_public_id: "DET-V1-ACME-0001",
  purpose_id: "supplier-onboarding",
  requested_action: "approve",
  claim_scope: ["identity"]
}

const pointersOf = (result: ReturnType<typeof decodeRelianceRequest>) =>
  Result.isFailure(result) ? result.failure.errors?.map((e) => e.pointer) : undefined

describe("decodeRelianceRequest", () => {
  it("accepts exactly the 7 caller fields", () => {
    expect(decodeRelianceRequest(validBody)).toEqual(Result.succeed(validBody))
  })

  it("refuses server-derived fields before anything else, one pointer each, whatever else is wrong", () => fc.assert(fc.property(
    fc.subarray([...ProhibitedRequestFields], { minLength: 1 }),
    fc.subarray(Object.keys(validBody)),
    fc.boolean(), (prohibited, dropped, withUnknown) => {
    const body: Record<string, unknown> = { ...validBody }
    for (const field of dropped) delete body[field]
    if (withUnknown) body.extra = 1
    for (const field of prohibited) body[field] = "ACTIONABLE"
    const result = decodeRelianceRequest(body)
    expect(Result.isFailure(result) && result.failure._tag).toBe("ProhibitedField")
    expect(pointersOf(result)).toEqual(prohibited.map((field) => `/${field}`))
  })))

  it("reports every missing, unknown or ill-typed field with its pointer", () => fc.assert(fc.property(
    fc.subarray(Object.keys(validBody)),
    fc.subarray(["extra", "receipt_digest", "credential_state", "a/b"]),
    fc.subarray(Object.keys(validBody)), (dropped, unknown, illTyped) => {
    fc.pre(dropped.length + unknown.length + illTyped.length > 0)
    const body: Record<string, unknown> = { ...validBody }
    for (const field of illTyped) body[field] = 42
    for (const field of dropped) delete body[field]
    for (const field of unknown) body[field] = "x"
    const result = decodeRelianceRequest(body)
    expect(Result.isFailure(result) && result.failure._tag).toBe("ValidationFailed")
    const expected = new Set([...illTyped, ...dropped, ...unknown].map((f) => "/" + f.replace("/", "~1")))
    expect(new Set(pointersOf(result))).toEqual(expected)
  })))

  it("checks the shape of each field", () => {
    const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
      [{ subject_public_id: "det-v1-lower" }, "/subject_public_id"],
      [{ subject_public_id: "DET-V2-ACME" }, "/subject_public_id"],
      [{ claim_scope: [] }, "/claim_scope"],
      [{ claim_scope: Array.from({ length: 33 }, (_, i) => `c${i}`) }, "/claim_scope"],
      [{ claim_scope: ["identity", ""] }, "/claim_scope/1"],
      [{ claim_scope: "identity" }, "/claim_scope"],
      [{ tenant_id: "" }, "/tenant_id"],
      [{ organization: "" }, "/organization"],
      [{ principal: "x".repeat(257) }, "/principal"]
    ]
    for (const [patch, pointer] of cases) {
      expect(pointersOf(decodeRelianceRequest({ ...validBody, ...patch })), JSON.stringify(patch)).toEqual([pointer])
    }
    expect(Result.isFailure(decodeRelianceRequest({ ...validBody, claim_scope: Array.from({ length: 32 }, (_, i) => `c${i}`) })))
      .toBe(false)
    for (const body of [null, [], "text", 7]) {
      const result = decodeRelianceRequest(body)
      expect(Result.isFailure(result) && result.failure._tag).toBe("ValidationFailed")
    }
  })

  // decodeRelianceRequest answers a body that fits exactly without the decoder (domain/Receipt.ts): it must accept
  // what the decoder accepts, with the decoder's value, and nothing else.
  it("answers every body as RelianceRequest's decoder does", () => {
    const decoder = Schema.decodeUnknownResult(RelianceRequest, { errors: "all", onExcessProperty: "error" })
    const name = fc.oneof(
      fc.constantFrom("", " ", "x", "x".repeat(256), "x".repeat(257), "DET-V1-ACME-ROBOTICS-0001", "det-v1-x", "a/b", "\u0000", "😀"),
      fc.string({ maxLength: 8 })
    )
    const value = fc.oneof(name, fc.array(name, { maxLength: 34 }), fc.constantFrom(42, null, true, {}, ["identity", 1]))
    const member = fc.constantFrom(...Object.keys(validBody), "extra")
    const body = fc.tuple(
      fc.array(fc.tuple(member, fc.option(value, { nil: undefined })), { maxLength: 8 }),
      fc.boolean()
    ).map(([changes, reorder]) => {
      const changed: Record<string, unknown> = { ...validBody }
      for (const [key, to] of changes) {
        if (to === undefined) delete changed[key]
        else changed[key] = to
      }
      return reorder ? Object.fromEntries(Object.entries(changed).reverse()) : changed
    })
    fc.assert(fc.property(body, (b) => {
      const ours = decodeRelianceRequest(b)
      const theirs = decoder(b)
      expect(Result.isSuccess(ours), JSON.stringify(b)).toBe(Result.isSuccess(theirs))
      if (Result.isSuccess(ours) && Result.isSuccess(theirs)) expect(ours.success).toStrictEqual(theirs.success)
    }), { numRuns: 2_000 })
  })
})
