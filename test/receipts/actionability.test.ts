import { describe, expect, it } from "@effect/vitest"
import { Result, Option } from "effect"
import * as fc from "fast-check"
import type { MachineTrustResponse } from "../../src/domain/MachineTrust.js"
import type { ActionabilityEvaluation } from "../../src/domain/Receipt.js"
import { evaluateActionability, ruleFor, verdictsFor } from "../../src/receipts/Actionability.js"
import type { ActionRule } from "../../src/domain/PolicyDocument.js"
import {
  actionRule,
  claimScope,
  policyWith,
  request,
  shippedActions,
  shippedPolicy,
  Tiers,
  trustDocument
} from "./arbitraries.js"

/** docs/API.md §8.2, restated check by check: the outcome each verdict must have. */
const expectedOutcomes = (trust: MachineTrustResponse, rule: ActionRule, scope: ReadonlyArray<string>) => ({
  freshness: rule.freshness.includes(trust.freshness.state),
  lifecycle: rule.lifecycle.includes(trust.lifecycle.state),
  // Issuance is NOT_AUTHORIZED: no credential exists, so needing one always fails.
  authority: !rule.requires_issued_credential,
  tier: Tiers.indexOf(trust.determination.tier) >= Tiers.indexOf(rule.min_tier),
  eligibility: trust.determination.eligible,
  claim_scope: scope.every((name) => trust.allowed_claims.includes(name) && !trust.prohibited_inferences.includes(name))
})

const evaluate = (trust: MachineTrustResponse, rule: ActionRule, scope: ReadonlyArray<string>): ActionabilityEvaluation =>
  Result.getOrThrow(evaluateActionability(trust, policyWith(rule), request("test-purpose", "test-action", scope)))

describe("verdicts", () => {
  it("come in the order of docs/API.md §8.2, each PASS or FAIL with a reason", () => fc.assert(fc.property(trustDocument, actionRule, claimScope, (trust, rule, scope) => {
    const verdicts = verdictsFor(trust, rule, scope)
    expect(verdicts.map((v) => v.check)).toEqual(["freshness", "lifecycle", "authority", "tier", "eligibility", "claim_scope"])
    for (const v of verdicts) {
      expect(["PASS", "FAIL"]).toContain(v.outcome)
      expect(v.reason.length).toBeGreaterThan(0)
    }
  }), { numRuns: 500 }))

  it("each outcome follows its rule", () => fc.assert(fc.property(trustDocument, actionRule, claimScope, (trust, rule, scope) => {
    const expected = expectedOutcomes(trust, rule, scope)
    const actual = Object.fromEntries(verdictsFor(trust, rule, scope).map((v) => [v.check, v.outcome === "PASS"]))
    expect(actual).toEqual(expected)
  }), { numRuns: 1000 }))

  it("claim_scope names the offending claims when it fails", () => fc.assert(fc.property(trustDocument, actionRule, claimScope, (trust, rule, scope) => {
    const offending = scope.filter((name) => !trust.allowed_claims.includes(name) || trust.prohibited_inferences.includes(name))
    fc.pre(offending.length > 0)
    const verdict = verdictsFor(trust, rule, scope).find((v) => v.check === "claim_scope")!
    expect(verdict.outcome).toBe("FAIL")
    for (const name of offending) expect(verdict.reason).toContain(name)
  })))
})

describe("decision", () => {
  it("is ACTIONABLE exactly when every verdict passes", () => fc.assert(fc.property(trustDocument, actionRule, claimScope, (trust, rule, scope) => {
    const evaluation = evaluate(trust, rule, scope)
    const allPass = Object.values(expectedOutcomes(trust, rule, scope)).every(Boolean)
    expect(evaluation.decision).toBe(allPass ? "ACTIONABLE" : "NOT_ACTIONABLE")
    expect(evaluation.decision === "ACTIONABLE").toBe(evaluation.verdicts.every((v) => v.outcome === "PASS"))
  }), { numRuns: 1000 }))

  it("is never ACTIONABLE when the action requires an issued credential", () => fc.assert(fc.property(
    trustDocument,
    actionRule.map((rule) => ({ ...rule, requires_issued_credential: true })),
    claimScope, (trust, rule, scope) => {
    const evaluation = evaluate(trust, rule, scope)
    expect(evaluation.decision).toBe("NOT_ACTIONABLE")
    expect(evaluation.verdicts.find((v) => v.check === "authority")?.outcome).toBe("FAIL")
  }), { numRuns: 500 }))

  it("is never ACTIONABLE for a shipped action that requires an issued credential, even on the best record", () => fc.assert(fc.property(
    trustDocument.map((trust) => ({
      ...trust,
      determination: { ...trust.determination, tier: "T4" as const, eligible: true },
      lifecycle: { state: "ACTIVE" as const },
      freshness: { ...trust.freshness, state: "CURRENT" as const },
      allowed_claims: ["identity", "assurance"],
      prohibited_inferences: []
    })),
    fc.constantFrom(...shippedActions.filter(([, , rule]) => rule.requires_issued_credential)), (trust, [purpose, action]) => {
    const evaluation = Result.getOrThrow(evaluateActionability(trust, shippedPolicy, request(purpose, action, ["identity"])))
    expect(evaluation.decision).toBe("NOT_ACTIONABLE")
    expect(evaluation.verdicts.filter((v) => v.outcome === "FAIL").map((v) => v.check)).toEqual(["authority"])
  })))

  it("is ACTIONABLE for a shipped action when the record satisfies it (the property above is not vacuous)", () => {
    const ok = shippedActions.filter(([, , rule]) => !rule.requires_issued_credential)
    expect(ok.length).toBeGreaterThan(0)
    const trust = fc.sample(trustDocument, { numRuns: 1, seed: 7 })[0]!
    for (const [purpose, action, rule] of ok) {
      const satisfying: MachineTrustResponse = {
        ...trust,
        determination: { ...trust.determination, tier: rule.min_tier, eligible: true },
        lifecycle: { state: rule.lifecycle[0]! },
        freshness: { ...trust.freshness, state: rule.freshness[0]! },
        allowed_claims: ["identity"],
        prohibited_inferences: []
      }
      const evaluation = Result.getOrThrow(evaluateActionability(satisfying, shippedPolicy, request(purpose, action, ["identity"])))
      expect(evaluation.decision, `${purpose}/${action}`).toBe("ACTIONABLE")
    }
  })
})

describe("evaluateActionability", () => {
  it("derives every decision field from the trust document and the policy", () => fc.assert(fc.property(trustDocument, actionRule, claimScope, (trust, rule, scope) => {
    const policy = policyWith(rule)
    const evaluation = Result.getOrThrow(evaluateActionability(trust, policy, request("test-purpose", "test-action", scope)))
    expect(evaluation).toMatchObject({
      tenant_id: "tenant-a",
      purpose_id: "test-purpose",
      requested_action: "test-action",
      claim_scope: scope,
      determination_id: trust.determination.determination_id,
      determination_digest: trust.determination.determination_digest,
      trust_state_digest: trust.trust_state_digest,
      policy_version: "test.1",
      policy_digest: policy.ref.policy_digest,
      tier: trust.determination.tier,
      lifecycle_state: trust.lifecycle.state,
      freshness_state: trust.freshness.state,
      authority_state: "ISSUANCE_NOT_AUTHORIZED",
      credential_state: "NOT_ISSUED"
    })
  })))

  it("answers unknown-purpose for any purpose or action the policy does not name", () => fc.assert(fc.property(
    trustDocument,
    fc.oneof(fc.string(), fc.constantFrom("constructor", "__proto__", "toString", "hasOwnProperty")),
    fc.oneof(fc.string(), fc.constantFrom("constructor", "__proto__", "screen", "approve")), (trust, purpose, action) => {
    fc.pre(!shippedActions.some(([p, a]) => p === purpose && a === action))
    const result = evaluateActionability(trust, shippedPolicy, request(purpose, action, ["identity"]))
    expect(Result.isFailure(result) && result.failure._tag).toBe("UnknownPurpose")
  })))

  it("finds every action the shipped policy names", () => {
    expect(shippedActions.length).toBeGreaterThan(0)
    for (const [purpose, action, rule] of shippedActions) {
      expect(Option.getOrThrow(ruleFor(shippedPolicy.document, purpose, action))).toEqual(rule)
    }
  })
})
