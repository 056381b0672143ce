import type { DeterminationBody } from "../../src/domain/Determination.js"

const DAY = 86_400_000

/** A valid ingestion body, CURRENT for 80 days after `asOfMs`. */
export const determinationBody = (asOfMs: number, overrides: Partial<DeterminationBody> = {}): DeterminationBody => ({
  subject: { subject_id: "sub_test", physical_subject_id: "phys_test", identity_state: "VERIFIED" },
  tier: "T2",
  eligible: true,
  why_this_tier: ["Registry identity verified"],
  why_not_higher: ["Second audit missing"],
  claims: [{ claim_id: "c1", type: "legal_name", value: "Test Co", scope: "identity" }],
  evidence: [{
    evidence_id: "ev1",
    kind: "registry_extract",
    digest: "a".repeat(64),
    collected_at: new Date(asOfMs - DAY).toISOString(),
    source: "registry"
  }],
  allowed_claims: ["identity", "assurance"],
  limitations: ["Entity only"],
  prohibited_inferences: ["credential_issued"],
  lifecycle_state: "NOT_ISSUED",
  as_of: new Date(asOfMs).toISOString(),
  valid_until: new Date(asOfMs + 100 * DAY).toISOString(),
  engine: { name: "engine", version: "1.0.0" },
  ...overrides
})

export const DAY_MS = DAY

/**
 * The 7 caller fields of a receipt or an evaluation, for `subject`; each test picks its own principal so
 * idempotency keys never collide across tests.
 */
export const relianceRequest = (subject: string, principal: string, overrides: Record<string, unknown> = {}) => ({
  tenant_id: "tenant-a",
  organization: "Acme Procurement",
  principal,
  subject_public_id: subject,
  purpose_id: "supplier-onboarding",
  requested_action: "approve",
  claim_scope: ["identity"],
  ...overrides
})
