import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import canonicalize from "canonicalize"
import { Either, FastCheck as fc } from "effect"
import { trustStateDigestOf as exportedTrustDigest, verifyReceipt, verifyReceiptDigest } from "../../src/client/index.js"
import { trustStateDigestOf } from "../../src/domain/MachineTrust.js"
import {
  decodeRelianceRequest,
  ProhibitedRequestFields,
  type ReceiptSnapshot,
  ReceiptSchemaId,
  type RelianceReceipt,
  sealReceipt
} from "../../src/domain/Receipt.js"
import { evaluateActionability } from "../../src/receipts/Actionability.js"
import { actionRule, claimScope, policyWith, request, trustDocument } from "./arbitraries.js"

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
  ...Either.getOrThrow(evaluateActionability(trust, policyWith(rule), request("test-purpose", "test-action", scope)))
}))

/** What the contract says a client computes, without the service's helpers: SHA-256 of the RFC 8785 text. */
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

const snapshotFields = Object.keys(fc.sample(snapshot, { numRuns: 1, seed: 1 })[0]!)

describe("receipt digests", () => {
  it("snapshot_payload holds exactly the contract's receipt fields", () => {
    expect(snapshotFields).toEqual([
      "schema", "receipt_id", "created_at", "tenant_id", "organization", "principal", "subject_public_id", "purpose_id",
      "requested_action", "claim_scope", "determination_id", "determination_digest", "trust_state_digest",
      "policy_version", "policy_digest", "tier", "lifecycle_state", "freshness_state", "decision", "verdicts",
      "authority_state", "credential_state"
    ])
  })

  it.prop("verify: receipt_digest is SHA-256 over the JCS form of snapshot_payload", [snapshot], ([snap]) => {
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
  })

  it.prop("change when any snapshot field changes", [
    snapshot,
    fc.constantFrom(...snapshotFields),
    fc.integer({ min: 0, max: 1_000_000 })
  ], ([snap, field, seed]) => {
    const current = (snap as Record<string, unknown>)[field]
    const replacement = fc.sample(otherValue(current), { numRuns: 1, seed })[0]
    const changed = { ...snap, [field]: replacement } as ReceiptSnapshot
    const original = sealReceipt(snap)
    // The stored digest no longer verifies the edited snapshot...
    expect(verifyReceiptDigest({ ...original, snapshot_payload: changed })).toBe(false)
    // ...and sealing the edited snapshot gives another digest.
    expect(sealReceipt(changed).receipt_digest).not.toBe(original.receipt_digest)
  }, { fastCheck: { numRuns: 500 } })

  it.prop("verifyReceipt catches a top-level field that disagrees with the snapshot", [
    snapshot,
    fc.constantFrom(...snapshotFields)
  ], ([snap, field]) => {
    const receipt = sealReceipt(snap)
    const current = (receipt as Record<string, unknown>)[field]
    const tampered = { ...receipt, [field]: fc.sample(otherValue(current), { numRuns: 1 })[0] } as RelianceReceipt
    expect(verifyReceiptDigest(tampered)).toBe(true)
    expect(verifyReceipt(tampered)).toBe(false)
  })

  it.prop("the client package re-exports the trust digest recipe", [trustDocument], ([trust]) => {
    expect(exportedTrustDigest(trust)).toBe(trustStateDigestOf(trust))
    expect(exportedTrustDigest(trust)).toBe(trust.trust_state_digest)
  })
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
  Either.isLeft(result) ? result.left.errors?.map((e) => e.pointer) : undefined

describe("decodeRelianceRequest", () => {
  it("accepts exactly the 7 caller fields", () => {
    expect(decodeRelianceRequest(validBody)).toEqual(Either.right(validBody))
  })

  it.prop("refuses server-derived fields before anything else, one pointer each, whatever else is wrong", [
    fc.subarray([...ProhibitedRequestFields], { minLength: 1 }),
    fc.subarray(Object.keys(validBody)),
    fc.boolean()
  ], ([prohibited, dropped, withUnknown]) => {
    const body: Record<string, unknown> = { ...validBody }
    for (const field of dropped) delete body[field]
    if (withUnknown) body.extra = 1
    for (const field of prohibited) body[field] = "ACTIONABLE"
    const result = decodeRelianceRequest(body)
    expect(Either.isLeft(result) && result.left._tag).toBe("ProhibitedField")
    expect(pointersOf(result)).toEqual(prohibited.map((field) => `/${field}`))
  })

  it.prop("reports every missing, unknown or ill-typed field with its pointer", [
    fc.subarray(Object.keys(validBody)),
    fc.subarray(["extra", "receipt_digest", "credential_state", "a/b"]),
    fc.subarray(Object.keys(validBody))
  ], ([dropped, unknown, illTyped]) => {
    fc.pre(dropped.length + unknown.length + illTyped.length > 0)
    const body: Record<string, unknown> = { ...validBody }
    for (const field of illTyped) body[field] = 42
    for (const field of dropped) delete body[field]
    for (const field of unknown) body[field] = "x"
    const result = decodeRelianceRequest(body)
    expect(Either.isLeft(result) && result.left._tag).toBe("ValidationFailed")
    const expected = new Set([...illTyped, ...dropped, ...unknown].map((f) => "/" + f.replace("/", "~1")))
    expect(new Set(pointersOf(result))).toEqual(expected)
  })

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
    expect(Either.isLeft(decodeRelianceRequest({ ...validBody, claim_scope: Array.from({ length: 32 }, (_, i) => `c${i}`) })))
      .toBe(false)
    for (const body of [null, [], "text", 7]) {
      const result = decodeRelianceRequest(body)
      expect(Either.isLeft(result) && result.left._tag).toBe("ValidationFailed")
    }
  })
})
