import { Effect, Schema } from "effect"
import { DigestPattern } from "../domain/Canonical.js"
import { Subject } from "../domain/Determination.js"
import { NonEmptyText } from "../domain/Json.js"
import { MachineTrustResponse } from "../domain/MachineTrust.js"
import { NotFound, type ProblemError } from "../domain/Problem.js"
import { PublicId, requirePublicId } from "../domain/PublicId.js"
import {
  ActionabilityEvaluation,
  CreatedRelianceReceipt,
  decodeRelianceRequest,
  RelianceReceipt,
  RelianceRequest
} from "../domain/Receipt.js"
import { Subscription, Subscriptions } from "../webhooks/Subscriptions.js"
import { ReceiptProofBundle } from "../log/Api.js"
import { Receipts } from "../receipts/Receipts.js"
import { compareWithDigest, compareWithReceipt } from "../trust/Compare.js"
import { Determinations } from "../trust/Determinations.js"
import { TrustResolver } from "../trust/TrustResolver.js"
import { SignatureScheme } from "../webhooks/Signature.js"
import { type ToolAnnotations, defineTool, type Tool } from "./ToolDefinition.js"

const readOnly: ToolAnnotations = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false }

const reliance =
  "A successful resolution is not permission to rely: check freshness.state (CURRENT), lifecycle.state, authority " +
  "and the claim scope, or call evaluate_actionability. Issuance is NOT_AUTHORIZED: never infer an issued credential."

const PublicIdArgument = Schema.Struct({ public_id: PublicId })

const TrustStateDigest = Schema.String.check(Schema.isPattern(DigestPattern, { message: "must be 64 lowercase hex characters" }))
  .annotate({ description: "trust_state_digest of an earlier resolution (64 lowercase hex)" })

const ReceiptId = NonEmptyText.check(Schema.isMaxLength(256))
  .annotate({ description: "A reliance receipt id (rr_ + ULID) of your tenant" })

const resolveTrust = defineTool({
  name: "resolve_trust",
  title: "Resolve trust",
  description:
    "Resolve a determination (public_id DET-V1-* or QUAL-V1-*). Returns its canonical pv.machine-trust.v1 document: " +
    "tier, claims, evidence, freshness, lifecycle, authority and trust_state_digest. Same document as " +
    "GET /api/v1/trust/{publicId}/machine. Keep trust_state_digest to detect changes later with compare_current. " +
    reliance + " Scope: trust:read.",
  scope: "trust:read",
  annotations: readOnly,
  input: PublicIdArgument,
  output: MachineTrustResponse,
  run: ({ public_id }) => TrustResolver.use((resolver) => resolver.resolve(public_id)),
  peek: ({ public_id }, resolver, nowMs) => resolver.peek(public_id, nowMs)
})

const SubjectDeterminations = Schema.Struct({
  subject: Subject,
  determinations: Schema.Array(Schema.Struct({ public_id: Schema.String, document: MachineTrustResponse }))
})

const resolveSubject = defineTool({
  name: "resolve_subject",
  title: "Resolve a subject",
  description:
    "Find the subject of a determination and every current determination of that subject. Pass exactly one of " +
    "{ public_id } (a determination of the subject) or { subject_id }. Returns { subject, determinations: " +
    "[{ public_id, document }] }, each document a full pv.machine-trust.v1 trust document, ordered by public id. " +
    reliance + " Scope: trust:read.",
  scope: "trust:read",
  annotations: readOnly,
  input: Schema.Union([PublicIdArgument, Schema.Struct({ subject_id: NonEmptyText })]),
  output: SubjectDeterminations,
  run: (input) =>
    Effect.gen(function*() {
      const resolver = yield* TrustResolver
      const determinations = yield* Determinations
      const named = "public_id" in input ? yield* resolver.resolve(input.public_id) : undefined
      const subjectId = named?.subject.subject_id ?? ("subject_id" in input ? input.subject_id : "")
      const stored = yield* determinations.bySubject(subjectId)
      const documents = yield* Effect.forEach(stored, (record) => resolver.resolve(record.public_id))
      const subject = named?.subject ?? documents[0]?.subject
      if (subject === undefined) {
        return yield* Effect.fail(new NotFound({ detail: `no determinations for subject ${subjectId.slice(0, 80)}` }))
      }
      return { subject, determinations: stored.map((record, i) => ({ public_id: record.public_id, document: documents[i]! })) }
    })
})

const resolveLifecycle = defineTool({
  name: "resolve_lifecycle",
  title: "Resolve lifecycle and freshness",
  description:
    "Returns the lifecycle, freshness and authority state of one determination (public_id), without claims or evidence: " +
    "the checks a client makes before relying. Rely only when freshness.state is CURRENT and lifecycle.state fits " +
    "the intended use; authority stays NOT_AUTHORIZED (no credential is ever issued). Scope: trust:read.",
  scope: "trust:read",
  annotations: readOnly,
  input: PublicIdArgument,
  output: Schema.Struct({
    public_id: Schema.String,
    determination_id: Schema.String,
    trust_state_digest: Schema.String,
    lifecycle: MachineTrustResponse.fields.lifecycle,
    freshness: MachineTrustResponse.fields.freshness,
    authority: MachineTrustResponse.fields.authority
  }),
  run: ({ public_id }) =>
    TrustResolver.use((resolver) => resolver.resolve(public_id)).pipe(
      Effect.map((document) => ({
        public_id,
        determination_id: document.determination.determination_id,
        trust_state_digest: document.trust_state_digest,
        lifecycle: document.lifecycle,
        freshness: document.freshness,
        authority: document.authority
      }))
    )
})

const TrustComparison = Schema.Struct({
  changed: Schema.Boolean,
  current_trust_state_digest: Schema.String,
  compared_trust_state_digest: Schema.String,
  changes: Schema.Array(Schema.Struct({ field: Schema.String, previous: Schema.String, current: Schema.String }))
})

const compareCurrent = defineTool({
  name: "compare_current",
  title: "Compare with the current trust state",
  description:
    "Has the trust state moved since you looked? Pass { public_id, trust_state_digest } from an earlier " +
    "resolve_trust, or { receipt_id } of one of your reliance receipts. changed is true when the current " +
    "trust_state_digest differs. Returns { changed, current_trust_state_digest, compared_trust_state_digest, changes }; " +
    "changes lists { field, previous, current } for what moved (with a receipt: " +
    "determination, tier, lifecycle_state, freshness_state, policy and the digest). Re-evaluate before relying " +
    "again when changed is true. Scope: trust:read.",
  scope: "trust:read",
  annotations: readOnly,
  input: Schema.Union([
    Schema.Struct({ public_id: PublicId, trust_state_digest: TrustStateDigest }),
    Schema.Struct({ receipt_id: ReceiptId })
  ]),
  output: TrustComparison,
  run: (input, caller) =>
    Effect.gen(function*() {
      const resolver = yield* TrustResolver
      if ("public_id" in input) {
        return compareWithDigest(input.trust_state_digest, yield* resolver.resolve(input.public_id))
      }
      const receipts = yield* Receipts
      const receipt = yield* receipts.get(caller.tenant_id, input.receipt_id)
      // A stored receipt holds its subject's id as text: decoded here like any other id reaching the service.
      const subject = yield* requirePublicId(receipt.subject_public_id)
      return compareWithReceipt(receipt, yield* resolver.resolve(subject))
    })
})

const relianceFields =
  "Arguments: the 7 caller fields tenant_id (your key's tenant), organization, principal, subject_public_id, " +
  "purpose_id and requested_action (see GET /api/v1/policy), claim_scope (1..32 claim names). Never send " +
  "server-derived fields (decision, tier, verdicts, trust_state_digest, …)."

const evaluateActionabilityTool = defineTool({
  name: "evaluate_actionability",
  title: "Evaluate actionability",
  description:
    "Evaluate whether an intended use of a determination is actionable under the current policy, without storing " +
    "anything. Returns verdicts (freshness, lifecycle, authority, tier, eligibility, claim_scope) and decision " +
    "ACTIONABLE only when every verdict passes. Actions that need an issued credential always fail authority " +
    "(issuance is NOT_AUTHORIZED). Act only on decision ACTIONABLE, and evaluate again before relying later. " +
    relianceFields + " Scope: actionability:read.",
  scope: "actionability:read",
  annotations: readOnly,
  input: RelianceRequest,
  decode: decodeRelianceRequest,
  output: ActionabilityEvaluation,
  run: (request, caller) => Receipts.use((receipts) => receipts.evaluate(caller.tenant_id, request))
})

const createRelianceReceipt = defineTool({
  name: "create_reliance_receipt",
  title: "Create a reliance receipt",
  description:
    "Record, durably, that you evaluated a determination for an intended use: the server resolves canonical trust, " +
    "evaluates the policy and stores a pv-reliance-receipt-v1 receipt (also when the decision is NOT_ACTIONABLE). " +
    "A receipt is evidence of the evaluation, not permission: act only when decision is ACTIONABLE. Repeating the " +
    "same request for the same determination returns the stored receipt with idempotent: true. " + relianceFields +
    " Verify receipt_digest = SHA-256 of the RFC 8785 form of snapshot_payload. Scope: receipt:write.",
  scope: "receipt:write",
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  input: RelianceRequest,
  decode: decodeRelianceRequest,
  output: CreatedRelianceReceipt,
  run: (request, caller) => Receipts.use((receipts) => receipts.create(caller.tenant_id, request))
})

/** get_reliance_receipt's answer for a standard encoding: the text (tlog-proof) or the bytes as standard base64. */
const EncodedProof = Schema.Struct({
  receipt_id: Schema.String.annotate({ description: "The receipt the proof is of (rr_ + ULID)" }),
  format: Schema.Literals(["tlog-proof", "cose-receipt", "transparent-statement"]).annotate({ description: "The encoding asked for" }),
  media_type: Schema.String.annotate({ description: "The media type GET /reliance-receipts/{id}/<format> serves it with" }),
  text: Schema.optionalKey(Schema.String.annotate({ description: "The C2SP tlog-proof, as served by GET …/tlog-proof" })),
  base64: Schema.optionalKey(Schema.String.annotate({ description: "The COSE bytes (standard base64), as served by GET …/cose-receipt or …/transparent-statement" }))
})

const getRelianceReceipt = defineTool({
  name: "get_reliance_receipt",
  title: "Get a reliance receipt",
  description:
    "Read one stored reliance receipt of your tenant by receipt_id (rr_ + ULID), exactly as stored, with the service's " +
    "Ed25519 signature. Receipts are immutable; to see whether the trust state has moved since, call compare_current " +
    "with the receipt_id. With include_proof: true, returns instead the receipt's proof bundle { receipt, log_entry, " +
    "leaf_index, checkpoint, inclusion_path, verifier_key, receipt_key } that anyone can verify offline against the " +
    "transparency log (not-yet-logged for the first moments after creation: retry after a second). format asks for " +
    "the same proof in a standard encoding instead: \"bundle\" (as include_proof), \"tlog-proof\" (C2SP, as text), " +
    "\"cose-receipt\" (RFC 9942) or \"transparent-statement\" (RFC 9943), the binary ones as base64, each with its " +
    "media_type. A receipt records " +
    "an evaluation, it is not permission: act only when its decision is ACTIONABLE, and check the trust state again " +
    "(compare_current) before relying later. Scope: receipt:read.",
  scope: "receipt:read",
  annotations: readOnly,
  input: Schema.Struct({
    receipt_id: ReceiptId,
    include_proof: Schema.optionalKey(Schema.Boolean.annotate({ description: "Return the proof bundle instead of the bare receipt" })),
    format: Schema.optionalKey(Schema.Literals(["bundle", "tlog-proof", "cose-receipt", "transparent-statement"]).annotate({
      description: "Return the receipt's proof in this encoding (default: the bare receipt, or the bundle with include_proof)"
    }))
  }),
  output: Schema.Union([RelianceReceipt, ReceiptProofBundle, EncodedProof]),
  run: ({ receipt_id, include_proof, format }, caller) =>
    Receipts.use((receipts): Effect.Effect<RelianceReceipt | typeof ReceiptProofBundle.Type | typeof EncodedProof.Type, ProblemError> => {
      if (format === "bundle" || (format === undefined && include_proof === true)) return receipts.proof(caller.tenant_id, receipt_id)
      if (format === undefined) return receipts.get(caller.tenant_id, receipt_id)
      return Effect.map(receipts.evidence(caller.tenant_id, receipt_id, format), (evidence) => ({
        receipt_id,
        format,
        media_type: evidence.mediaType,
        ...(typeof evidence.body === "string" ? { text: evidence.body } : { base64: Buffer.from(evidence.body).toString("base64") })
      }))
    })
})

const subscribeTrustChanges = defineTool({
  name: "subscribe_trust_changes",
  title: "Subscribe to trust changes",
  description:
    "Subscribe to changes of one determination (public_id). Without webhook_url delivery is pull: the answer names " +
    "events_url (GET /api/v1/events?public_id=…&after=…, scope trust:read) and `after`, the chain head when you " +
    "subscribed; poll it and follow next_after for signed, hash-chained events (recorded, updated, lifecycle and " +
    "freshness changes). With webhook_url (https, a public address) each new event is POSTed there in order, signed " +
    "with the Standard Webhooks headers; the answer carries webhook_secret once, the first time (signature_scheme v1a: no secret, verify with the service's public key). Subscribing again " +
    "with the same API key (and URL) returns the same subscription. An event is news, not permission: resolve and " +
    "evaluate again before relying on a changed determination. Scope: subscription:write.",
  scope: "subscription:write",
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  input: Schema.Struct({
    public_id: PublicId,
    webhook_url: Schema.optionalKey(NonEmptyText.check(Schema.isMaxLength(4096)).annotate({
      description: "https:// URL to POST each event to (at most 2,048 characters, no user information, a public address)"
    })),
    signature_scheme: Schema.optionalKey(SignatureScheme.annotate({
      description: "With webhook_url: v1 (default; HMAC with the webhook_secret returned once) or v1a (Ed25519 with the service's " +
        "key at GET /api/v1/webhooks/signing-key; no secret)"
    }))
  }),
  output: Subscription,
  run: ({ public_id, webhook_url, signature_scheme }, caller) =>
    Subscriptions.use((subscriptions) =>
      Effect.map(
        subscriptions.subscribe({ key_id: caller.key_id, tenant_id: caller.tenant_id }, public_id, webhook_url, signature_scheme),
        (subscribed) => subscribed.subscription
      ))
})

/** The registry: each tool declared once; tools/list and tools/call both read it. */
export const tools: ReadonlyArray<Tool> = [
  resolveTrust,
  resolveSubject,
  evaluateActionabilityTool,
  createRelianceReceipt,
  getRelianceReceipt,
  compareCurrent,
  resolveLifecycle,
  subscribeTrustChanges
]
