import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Context, Effect, Layer, Schema } from "effect"
import { type LoadedPolicy, loadPolicy, PolicyDocument } from "../domain/PolicyDocument.js"

// The reliance policy service lives with trust (not receipts): every trust document names the policy it
// was resolved under, and receipts evaluate against the same policy through trust (receipts → trust only).
// Its schemas and pure helpers are in domain/PolicyDocument.ts.

export const defaultPolicyPath = fileURLToPath(new URL("../../policy/policy.v1.json", import.meta.url))

/** The policy shipped with the service, validated at start: a broken policy file stops the start. */
const make: Effect.Effect<LoadedPolicy> = Effect.gen(function*() {
  const raw = yield* Effect.try(() => JSON.parse(readFileSync(defaultPolicyPath, "utf8")) as unknown)
  const document = yield* Schema.decodeUnknownEffect(PolicyDocument)(raw, { onExcessProperty: "error" })
  return loadPolicy(document)
}).pipe(
  Effect.mapError((e) => new Error(`policy file ${defaultPolicyPath} is invalid: ${String(e)}`)),
  Effect.orDie
)

export class Policy extends Context.Service<Policy, LoadedPolicy>()("pv/Policy", { make }) {
  static readonly layer: Layer.Layer<Policy> = Layer.effect(Policy, make)

  static readonly Fixed = (document: PolicyDocument): Layer.Layer<Policy> => Layer.succeed(Policy, loadPolicy(document))
}
