import { Schema } from "effect"
import { digestOf } from "./Canonical.js"
import { Tier } from "./Determination.js"
import { FreshnessState, LifecycleState } from "./Freshness.js"
import type { PolicyRef } from "./MachineTrust.js"

// The reliance policy's shape and digest (pure); the service that loads the shipped file is trust/Policy.ts.

export const ActionRule = Schema.Struct({
  min_tier: Tier,
  freshness: Schema.Array(FreshnessState),
  lifecycle: Schema.Array(LifecycleState),
  requires_issued_credential: Schema.Boolean
})
export type ActionRule = typeof ActionRule.Type

export const PolicyDocument = Schema.Struct({
  policy_id: Schema.String.check(Schema.isMinLength(1)),
  policy_version: Schema.String.check(Schema.isMinLength(1)),
  description: Schema.optionalKey(Schema.String),
  purposes: Schema.Record(
    Schema.String,
    Schema.Struct({
      description: Schema.optionalKey(Schema.String),
      actions: Schema.Record(Schema.String, ActionRule)
    })
  )
}).annotate({ identifier: "PolicyDocument" })
export type PolicyDocument = typeof PolicyDocument.Type

/** GET /policy: the document as shipped plus its digest, so a client can check `policy_digest` itself. */
export const PolicyView = Schema.Struct({
  policy_id: Schema.String,
  policy_version: Schema.String,
  policy_digest: Schema.String.annotate({ description: "JCS SHA-256 of the document without policy_digest" }),
  description: Schema.optionalKey(Schema.String),
  purposes: PolicyDocument.fields.purposes
}).annotate({ identifier: "Policy" })
export type PolicyView = typeof PolicyView.Type

export interface LoadedPolicy {
  readonly document: PolicyDocument
  readonly ref: PolicyRef
}

export const loadPolicy = (document: PolicyDocument): LoadedPolicy => ({
  document,
  ref: { policy_id: document.policy_id, policy_version: document.policy_version, policy_digest: digestOf(document) }
})

export const policyView = ({ document, ref }: LoadedPolicy): PolicyView => {
  const { policy_id, policy_version, ...rest } = document
  return { policy_id, policy_version, policy_digest: ref.policy_digest, ...rest }
}
