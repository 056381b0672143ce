import { Effect } from "effect"
import * as fc from "fast-check"
import { digestOf } from "../../src/domain/Canonical.js"
import type { DeterminationBody, Tier } from "../../src/domain/Determination.js"
import { buildMachineTrust, type MachineTrustResponse } from "../../src/domain/MachineTrust.js"
import type { RelianceRequest } from "../../src/domain/Receipt.js"
import { type ActionRule, loadPolicy, type LoadedPolicy } from "../../src/domain/PolicyDocument.js"
import { Policy } from "../../src/trust/Policy.js"
import { FreshnessStates, LifecycleStates } from "../../src/domain/Freshness.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"

export const Tiers: ReadonlyArray<Tier> = ["T0", "T1", "T2", "T3", "T4"]

/** The policy file the service ships, loaded the way the service loads it. */
export const shippedPolicy: LoadedPolicy = Effect.runSync(Effect.provide(Policy, Policy.layer))

/** A small pool so generated claim scopes often hit allowed and prohibited names, plus free-form names. */
const claimPool = ["identity", "assurance", "financial_standing", "credential_issued", "location", "ownership"]
export const claimName = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...claimPool) },
  { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 12 }) }
)
const namesFromPool = fc.subarray(claimPool)

const asOf = Date.parse("2031-03-01T00:00:00.000Z")

/**
 * Trust documents built by the real builder from generated records, at a generated instant between
 * as_of and well past expiry (valid_until = as_of + 100 d), so every freshness state occurs.
 */
export const trustDocument: fc.Arbitrary<MachineTrustResponse> = fc.record({
  tier: fc.constantFrom(...Tiers),
  eligible: fc.boolean(),
  lifecycle_state: fc.constantFrom(...LifecycleStates),
  allowed_claims: namesFromPool,
  prohibited_inferences: namesFromPool,
  nowOffset: fc.integer({ min: 0, max: 260 * DAY_MS }),
  version: fc.integer({ min: 1, max: 1_000 })
}).map(({ nowOffset, version, ...fields }) => {
  const body: DeterminationBody = determinationBody(asOf, fields)
  return buildMachineTrust(
    {
      public_id: "DET-V1-PROP-0001",
      determination_id: `dv_01J${String(version).padStart(23, "0")}`,
      version,
      body,
      determination_digest: digestOf(body),
      evidence_digest: digestOf(body.evidence),
      recorded_at: new Date(asOf).toISOString()
    },
    shippedPolicy.ref,
    { sequence: version, eventHash: "e".repeat(64) },
    asOf + nowOffset
  )
})

export const actionRule: fc.Arbitrary<ActionRule> = fc.record({
  min_tier: fc.constantFrom(...Tiers),
  freshness: fc.subarray([...FreshnessStates]),
  lifecycle: fc.subarray([...LifecycleStates]),
  requires_issued_credential: fc.boolean()
})

/** A one-rule policy around a generated rule, with its digest computed the service's way. */
export const policyWith = (rule: ActionRule): LoadedPolicy =>
  loadPolicy({
    policy_id: "pv-test-policy",
    policy_version: "test.1",
    purposes: { "test-purpose": { actions: { "test-action": rule } } }
  })

export const claimScope = fc.array(claimName, { minLength: 1, maxLength: 32 })

export const request = (purpose_id: string, requested_action: string, scope: ReadonlyArray<string>): RelianceRequest => ({
  tenant_id: "tenant-a",
  organization: "Acme Procurement",
  principal: "agent:buyer-7",
  subject_public_id: "DET-V1-PROP-0001" as RelianceRequest["subject_public_id"],
  purpose_id,
  requested_action,
  claim_scope: scope
})

/** Every (purpose, action) the shipped policy names. */
export const shippedActions: ReadonlyArray<readonly [string, string, ActionRule]> = Object.entries(
  shippedPolicy.document.purposes
).flatMap(([purpose, { actions }]) => Object.entries(actions).map(([action, rule]) => [purpose, action, rule] as const))
