/**
 * What each member of a tool's arguments or result means, in the words an agent reads in
 * `inputSchema` / `outputSchema`: one home, so the same name means the same thing in every tool.
 */
export const FieldDescriptions: Readonly<Record<string, string>> = {
  // arguments
  public_id: "Public id of a determination: DET-V1-* or QUAL-V1-* (uppercase letters, digits and hyphens).",
  subject_id: "Id of the subject (the entity a determination is about), as given in subject.subject_id.",
  receipt_id: "Id of one of your tenant's reliance receipts: rr_ followed by a ULID.",
  include_proof: "true: return the receipt's proof bundle (receipt, log entry, inclusion proof, signed checkpoint) instead of the bare receipt.",
  tenant_id: "Your API key's tenant; a receipt can only be created or read for that tenant.",
  organization: "The organization that relies on the determination (yours).",
  principal: "The person or system within your organization that relies on it.",
  subject_public_id: "Public id (DET-V1-* or QUAL-V1-*) of the determination relied upon.",
  purpose_id: "Why you rely on it: a purpose of the policy (GET /api/v1/policy), e.g. supplier-onboarding.",
  requested_action: "What you intend to do: an action of that purpose in the policy, e.g. screen.",
  claim_scope: "The claim names you rely on (1 to 32); each must be allowed and not a prohibited inference.",
  trust_state_digest: "SHA-256 (64 lowercase hex) of the trust document without this member; it changes whenever the trust state does.",
  // trust document
  schema: "Schema identifier of this document; validate it before use.",
  subject: "The subject: subject_id, physical_subject_id and identity_state.",
  claims: "The determination's claims: claim_id, type, value and scope each.",
  evidence: "Evidence behind the claims: evidence_id, kind, digest, collected_at and source each.",
  determination: "The determination: tier, determination_id, determination_digest, eligible, why_this_tier and why_not_higher.",
  authority: "Issuance authority: always issuance_authorized false and NOT_AUTHORIZED; never infer an issued credential.",
  lifecycle: "Lifecycle state (NOT_ISSUED, ACTIVE, SUSPENDED, REVOKED, EXPIRED or SUPERSEDED): check it fits your intended use.",
  freshness: "Freshness state (CURRENT, APPROACHING_STALE, STALE or EXPIRED) with as_of and valid_until: rely only on CURRENT.",
  integrity: "How the digests are made (RFC 8785 JSON, SHA-256) and the head of the determination's event chain.",
  limitations: "Limitations of the determination, in words.",
  prohibited_inferences: "What must not be inferred from this determination.",
  allowed_claims: "Claim names a relying party may rely on.",
  policy: "The policy the document was resolved under: policy_id, policy_version and policy_digest.",
  engine: "The engine that made the determination: name and version.",
  purchase: "Purchase details recorded with the determination (may be empty).",
  determinations: "Every current determination of the subject, each with its public id and its full trust document.",
  document: "The determination's pv.machine-trust.v1 trust document.",
  // receipts and evaluations
  created_at: "When the receipt was stored (RFC 3339 UTC).",
  determination_id: "Id of the stored determination version that was evaluated (dv_ + ULID).",
  determination_digest: "SHA-256 of that determination version.",
  policy_version: "Version of the policy the evaluation used.",
  policy_digest: "SHA-256 of that policy document.",
  tier: "The determination's tier (T0 to T4).",
  lifecycle_state: "Lifecycle state at evaluation.",
  freshness_state: "Freshness state at evaluation.",
  decision: "ACTIONABLE only when every verdict passed; otherwise NOT_ACTIONABLE. Act only on ACTIONABLE.",
  verdicts: "One verdict per check, in order freshness, lifecycle, authority, tier, eligibility, claim_scope: PASS or FAIL with a reason.",
  authority_state: "Always ISSUANCE_NOT_AUTHORIZED.",
  credential_state: "Always NOT_ISSUED: no credential was issued.",
  snapshot_payload: "Everything the receipt records; receipt_digest is SHA-256 of its RFC 8785 form.",
  receipt_digest: "SHA-256 (64 lowercase hex) of the RFC 8785 form of snapshot_payload.",
  signature: "The service's Ed25519 signature over \"pv-receipt-v1\\n\" + receipt_digest; its kid is in GET /api/v1/events/keys.",
  idempotent: "true when an existing receipt was returned for a repeated request.",
  // proof bundle
  receipt: "The stored reliance receipt.",
  log_entry: "The receipt's entry in the transparency log.",
  leaf_index: "Index of that entry in the log.",
  checkpoint: "A signed checkpoint (C2SP signed note) of a log tree that includes the entry.",
  inclusion_path: "RFC 9162 inclusion proof of the entry in that tree (hex hashes).",
  verifier_key: "The note verifier key of the log, to check the checkpoint's signature.",
  receipt_key: "The public key (JWK) that signed the receipt.",
  // compare_current
  changed: "true when the current trust state differs from the one compared.",
  current_trust_state_digest: "The trust_state_digest now.",
  compared_trust_state_digest: "The trust_state_digest you compared against.",
  changes: "What moved: { field, previous, current } each.",
  // subscriptions
  subscription_id: "Id of the subscription (the same for the same API key and public id).",
  delivery: "How changes are delivered: pull (poll events_url).",
  after: "The event sequence the subscription starts after (the chain head when subscribing).",
  events_url: "Where to poll for signed, hash-chained events after `after` (scope trust:read)."
}

/** `trust_state_digest` → `Trust state digest`. */
export const titleOf = (member: string): string => {
  const words = member.replace(/_/g, " ")
  return words.charAt(0).toUpperCase() + words.slice(1)
}
