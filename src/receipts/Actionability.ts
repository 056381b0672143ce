import { Option, Result } from "effect"
import type { Tier } from "../domain/Determination.js"
import type { MachineTrustResponse } from "../domain/MachineTrust.js"
import { UnknownPurpose } from "../domain/Problem.js"
import type { ActionabilityEvaluation, Decision, RelianceRequest, Verdict } from "../domain/Receipt.js"
import type { ActionRule, LoadedPolicy, PolicyDocument } from "../domain/PolicyDocument.js"

const tierRank: Record<Tier, number> = { T0: 0, T1: 1, T2: 2, T3: 3, T4: 4 }

const listed = (values: ReadonlyArray<string>) => (values.length === 0 ? "none" : values.join(", "))

const verdict = (check: Verdict["check"], pass: boolean, passReason: string, failReason: string): Verdict => ({
  check,
  outcome: pass ? "PASS" : "FAIL",
  reason: pass ? passReason : failReason
})

/** The policy's rule for one purpose and action; own properties only, so "constructor" is not a purpose. */
export const ruleFor = (policy: PolicyDocument, purposeId: string, action: string): Option.Option<ActionRule> => {
  if (!Object.hasOwn(policy.purposes, purposeId)) return Option.none()
  const actions = policy.purposes[purposeId]!.actions
  return Object.hasOwn(actions, action) ? Option.some(actions[action]!) : Option.none()
}

/**
 * docs/API.md §8.2, the one home of the verdict list: freshness, lifecycle, authority, tier,
 * eligibility, claim_scope, in that order.
 */
export const verdictsFor = (
  trust: MachineTrustResponse,
  rule: ActionRule,
  claimScope: ReadonlyArray<string>
): ReadonlyArray<Verdict> => {
  const freshness = trust.freshness.state
  const lifecycle = trust.lifecycle.state
  const tier = trust.determination.tier
  // No credential exists while issuance is NOT_AUTHORIZED, so an action that needs one always fails here.
  const credentialIssued: boolean = trust.authority.issuance_authorized
  const notAllowed = claimScope.filter((name) => !trust.allowed_claims.includes(name))
  const prohibited = claimScope.filter((name) => trust.prohibited_inferences.includes(name))
  return [
    verdict("freshness", rule.freshness.includes(freshness),
      `freshness ${freshness} is one of the accepted states (${listed(rule.freshness)})`,
      `freshness ${freshness} is not one of the accepted states (${listed(rule.freshness)})`),
    verdict("lifecycle", rule.lifecycle.includes(lifecycle),
      `lifecycle ${lifecycle} is one of the accepted states (${listed(rule.lifecycle)})`,
      `lifecycle ${lifecycle} is not one of the accepted states (${listed(rule.lifecycle)})`),
    verdict("authority", !rule.requires_issued_credential || credentialIssued,
      "the action does not require an issued credential",
      "the action requires an issued credential; issuance is NOT_AUTHORIZED and none has been issued"),
    verdict("tier", tierRank[tier] >= tierRank[rule.min_tier],
      `tier ${tier} meets the minimum ${rule.min_tier}`,
      `tier ${tier} is below the minimum ${rule.min_tier}`),
    verdict("eligibility", trust.determination.eligible,
      "the determination marks the subject eligible",
      "the determination marks the subject not eligible"),
    verdict("claim_scope", notAllowed.length === 0 && prohibited.length === 0,
      "every claim in scope is allowed and none is a prohibited inference",
      [
        notAllowed.length > 0 ? `not in allowed_claims: ${listed(notAllowed)}` : undefined,
        prohibited.length > 0 ? `prohibited inferences: ${listed(prohibited)}` : undefined
      ].filter((part) => part !== undefined).join("; "))
  ]
}

export const decisionOf = (verdicts: ReadonlyArray<Verdict>): Decision =>
  verdicts.every((v) => v.outcome === "PASS") ? "ACTIONABLE" : "NOT_ACTIONABLE"

/** The rule for the request's purpose and action, or the unknown-purpose problem (docs/API.md §5.2). */
export const requireRule = (
  policy: LoadedPolicy,
  request: Pick<RelianceRequest, "purpose_id" | "requested_action">
): Result.Result<ActionRule, UnknownPurpose> =>
  Result.fromOption(ruleFor(policy.document, request.purpose_id, request.requested_action), () =>
    new UnknownPurpose({
      detail: `Policy ${policy.ref.policy_version} has no action '${request.requested_action.slice(0, 80)}' ` +
        `for purpose '${request.purpose_id.slice(0, 80)}'.`
    }))

/**
 * Trust document + policy + request → the full evaluation (echoed request, derived state, verdicts,
 * decision). Pure: the REST endpoint, receipt creation and the MCP tool all come through here.
 */
export const evaluateActionability = (
  trust: MachineTrustResponse,
  policy: LoadedPolicy,
  request: RelianceRequest
): Result.Result<ActionabilityEvaluation, UnknownPurpose> =>
  Result.map(requireRule(policy, request), (rule) => {
    const verdicts = verdictsFor(trust, rule, request.claim_scope)
    return {
      tenant_id: request.tenant_id,
      organization: request.organization,
      principal: request.principal,
      subject_public_id: request.subject_public_id,
      purpose_id: request.purpose_id,
      requested_action: request.requested_action,
      claim_scope: request.claim_scope,
      determination_id: trust.determination.determination_id,
      determination_digest: trust.determination.determination_digest,
      trust_state_digest: trust.trust_state_digest,
      policy_version: policy.ref.policy_version,
      policy_digest: policy.ref.policy_digest,
      tier: trust.determination.tier,
      lifecycle_state: trust.lifecycle.state,
      freshness_state: trust.freshness.state,
      decision: decisionOf(verdicts),
      verdicts,
      authority_state: "ISSUANCE_NOT_AUTHORIZED",
      credential_state: "NOT_ISSUED"
    } satisfies ActionabilityEvaluation
  })
