import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Effect, Layer, Schema } from "effect"
import { digestOf } from "../domain/Canonical.js"
import { Tier } from "../domain/Determination.js"
import type { PolicyRef } from "../domain/MachineTrust.js"
import { FreshnessState, LifecycleState } from "../trust/Freshness.js"

export const ActionRule = Schema.Struct({
  min_tier: Tier,
  freshness: Schema.Array(FreshnessState),
  lifecycle: Schema.Array(LifecycleState),
  requires_issued_credential: Schema.Boolean
})
export type ActionRule = typeof ActionRule.Type

export const PolicyDocument = Schema.Struct({
  policy_id: Schema.String.pipe(Schema.minLength(1)),
  policy_version: Schema.String.pipe(Schema.minLength(1)),
  description: Schema.optional(Schema.String),
  purposes: Schema.Record({
    key: Schema.String,
    value: Schema.Struct({
      description: Schema.optional(Schema.String),
      actions: Schema.Record({ key: Schema.String, value: ActionRule })
    })
  })
}).annotations({ identifier: "PolicyDocument" })
export type PolicyDocument = typeof PolicyDocument.Type

/** GET /policy: the document as shipped plus its digest, so a client can check `policy_digest` itself. */
export const PolicyView = Schema.Struct({
  policy_id: Schema.String,
  policy_version: Schema.String,
  policy_digest: Schema.String.annotations({ description: "JCS SHA-256 of the document without policy_digest" }),
  description: Schema.optional(Schema.String),
  purposes: PolicyDocument.fields.purposes
}).annotations({ identifier: "Policy" })
export type PolicyView = typeof PolicyView.Type

export const defaultPolicyPath = fileURLToPath(new URL("../../policy/policy.v1.json", import.meta.url))

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

/** The policy shipped with the service, validated at start: a broken policy file stops the start. */
export class Policy extends Effect.Service<Policy>()("pv/Policy", {
  effect: Effect.gen(function*() {
    const raw = yield* Effect.try(() => JSON.parse(readFileSync(defaultPolicyPath, "utf8")) as unknown)
    const document = yield* Schema.decodeUnknown(PolicyDocument, { onExcessProperty: "error" })(raw)
    return loadPolicy(document)
  }).pipe(Effect.orDieWith((e) => new Error(`policy file ${defaultPolicyPath} is invalid: ${String(e)}`)))
}) {
  static readonly Fixed = (document: PolicyDocument): Layer.Layer<Policy> =>
    Layer.succeed(Policy, Policy.make(loadPolicy(document)))
}
