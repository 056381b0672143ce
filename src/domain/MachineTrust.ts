import { Schema } from "effect"
import { FreshnessState, freshnessAt, LifecycleState } from "./Freshness.js"
import { digestOf } from "./Canonical.js"
import { Claim, Evidence, Subject, Tier, type StoredDetermination } from "./Determination.js"
import { JsonObject } from "./Json.js"

export const MachineTrustSchemaId = "pv.machine-trust.v1" as const

export interface PolicyRef {
  readonly policy_id: string
  readonly policy_version: string
  readonly policy_digest: string
}

export interface EventHead {
  readonly sequence: number
  readonly eventHash: string | null
}

const Strings = Schema.Array(Schema.String)

/** The canonical trust document (docs/API.md §6), also the OpenAPI schema of the trust endpoints. */
export const MachineTrustResponse = Schema.Struct({
  schema: Schema.Literal(MachineTrustSchemaId),
  trust_state_digest: Schema.String,
  subject: Subject,
  claims: Schema.Array(Claim),
  evidence: Schema.Array(Evidence),
  determination: Schema.Struct({
    tier: Tier,
    determination_id: Schema.String,
    determination_digest: Schema.String,
    eligible: Schema.Boolean,
    why_this_tier: Strings,
    why_not_higher: Strings
  }),
  authority: Schema.Struct({
    issuance_authorized: Schema.Literal(false),
    authority_state: Schema.Literal("NOT_AUTHORIZED"),
    authoritative_state: Schema.Literal("NOT_AUTHORIZED"),
    signing_key_count: Schema.Literal(0)
  }),
  lifecycle: Schema.Struct({ state: LifecycleState }),
  freshness: Schema.Struct({ state: FreshnessState, as_of: Schema.String, valid_until: Schema.String }),
  integrity: Schema.Struct({
    canonicalization: Schema.Literal("RFC8785"),
    digest_algorithm: Schema.Literal("sha-256"),
    determination_digest: Schema.String,
    evidence_digest: Schema.String,
    event_head: Schema.Struct({ sequence: Schema.Int, eventHash: Schema.NullOr(Schema.String) })
  }),
  limitations: Strings,
  prohibited_inferences: Strings,
  allowed_claims: Strings,
  policy: Schema.Struct({ policy_id: Schema.String, policy_version: Schema.String, policy_digest: Schema.String }),
  engine: Schema.Struct({ name: Schema.String, version: Schema.String }),
  purchase: JsonObject
}).annotate({ identifier: "MachineTrustResponse", description: "Canonical trust document, schema pv.machine-trust.v1" })
export type MachineTrustResponse = typeof MachineTrustResponse.Type

/**
 * Issuance is NOT_AUTHORIZED: no credential has been issued and no signing key exists for one.
 * Event-signing keys are a different thing and never count here.
 */
export const authorityBlock = {
  issuance_authorized: false,
  authority_state: "NOT_AUTHORIZED",
  authoritative_state: "NOT_AUTHORIZED",
  signing_key_count: 0
} as const

/**
 * Record + policy + event head + time → trust document. Pure, and without per-request fields, so the
 * digest only moves when the record, the policy, the event head or the freshness state moves.
 */
export const buildMachineTrust = (
  stored: StoredDetermination,
  policy: PolicyRef,
  eventHead: EventHead,
  nowMs: number
): MachineTrustResponse => {
  const body = stored.body
  const withoutDigest = {
    schema: MachineTrustSchemaId,
    subject: body.subject,
    claims: body.claims,
    evidence: body.evidence,
    determination: {
      tier: body.tier,
      determination_id: stored.determination_id,
      determination_digest: stored.determination_digest,
      eligible: body.eligible,
      why_this_tier: body.why_this_tier,
      why_not_higher: body.why_not_higher
    },
    authority: authorityBlock,
    lifecycle: { state: body.lifecycle_state },
    freshness: {
      state: freshnessAt(nowMs, Date.parse(body.as_of), Date.parse(body.valid_until), body.lifecycle_state),
      as_of: body.as_of,
      valid_until: body.valid_until
    },
    integrity: {
      canonicalization: "RFC8785",
      digest_algorithm: "sha-256",
      determination_digest: stored.determination_digest,
      evidence_digest: stored.evidence_digest,
      event_head: { sequence: eventHead.sequence, eventHash: eventHead.eventHash }
    },
    limitations: body.limitations,
    prohibited_inferences: body.prohibited_inferences,
    allowed_claims: body.allowed_claims,
    policy: { policy_id: policy.policy_id, policy_version: policy.policy_version, policy_digest: policy.policy_digest },
    engine: body.engine,
    purchase: body.purchase ?? {}
  } as const
  const { schema, ...rest } = withoutDigest
  return { schema, trust_state_digest: digestOf(withoutDigest), ...rest }
}

/** Recompute a document's digest: what clients and tests use to check `trust_state_digest`. */
export const trustStateDigestOf = (document: MachineTrustResponse): string => {
  const { trust_state_digest: _, ...rest } = document
  return digestOf(rest)
}
