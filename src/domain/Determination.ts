import { Schema } from "effect"
import { LifecycleState } from "./Freshness.js"
import { JsonObject, NonEmptyText, OneOf, SafeInt, Text, Timestamp } from "./Json.js"

export const Tier = OneOf("Tier", ["T0", "T1", "T2", "T3", "T4"])
export type Tier = typeof Tier.Type

const Names = Schema.Array(Text).check(Schema.isMaxLength(256))

export const Claim = Schema.Struct({
  claim_id: NonEmptyText,
  type: NonEmptyText,
  value: Schema.Union([Text, SafeInt, Schema.Boolean]),
  scope: NonEmptyText
}).annotate({ identifier: "Claim" })

export const Evidence = Schema.Struct({
  evidence_id: NonEmptyText,
  kind: NonEmptyText,
  digest: Schema.String.check(Schema.isPattern(/^[0-9a-f]{64}$/u, { message: "must be 64 lowercase hex characters" })),
  collected_at: Timestamp,
  source: NonEmptyText
}).annotate({ identifier: "Evidence" })
export type Evidence = typeof Evidence.Type

export const Subject = Schema.Struct({
  subject_id: NonEmptyText,
  physical_subject_id: NonEmptyText,
  identity_state: NonEmptyText
}).annotate({ identifier: "Subject" })

/** Operator ingestion body (docs/API.md §7.11); its JCS digest is the determination_digest. */
export const DeterminationBody = Schema.Struct({
  subject: Subject,
  tier: Tier,
  eligible: Schema.Boolean,
  why_this_tier: Names,
  why_not_higher: Names,
  claims: Schema.Array(Claim).check(Schema.isMaxLength(256)),
  evidence: Schema.Array(Evidence).check(
    Schema.isMaxLength(256),
    Schema.makeFilter((items: ReadonlyArray<Evidence>) => {
      const seen = new Set<string>()
      for (const [i, item] of items.entries()) {
        if (seen.has(item.evidence_id)) return { path: [i, "evidence_id"], issue: "duplicate evidence_id" }
        seen.add(item.evidence_id)
      }
      return true
    })
  ),
  allowed_claims: Names,
  limitations: Names,
  prohibited_inferences: Names,
  lifecycle_state: LifecycleState,
  as_of: Timestamp,
  valid_until: Timestamp,
  engine: Schema.Struct({ name: NonEmptyText, version: NonEmptyText }),
  purchase: Schema.optionalKey(JsonObject)
}).check(
  Schema.makeFilter((body: { readonly as_of: string; readonly valid_until: string }) =>
    Date.parse(body.valid_until) > Date.parse(body.as_of) ||
    { path: ["valid_until"], issue: "must be later than as_of" }
  )
).annotate({ identifier: "DeterminationBody" })
export type DeterminationBody = typeof DeterminationBody.Type

/** One stored version of a determination, as the repository hands it out. */
export interface StoredDetermination {
  readonly public_id: string
  readonly determination_id: string
  readonly version: number
  readonly body: DeterminationBody
  readonly determination_digest: string
  readonly evidence_digest: string
  readonly recorded_at: string
}
