import { Result, Schema, SchemaAST } from "effect"
import { FreshnessState, LifecycleState } from "./Freshness.js"
import { TenantId } from "./ApiKeyRecord.js"
import { jcs } from "../verify/FastJcs.js"
import { sha256Hex } from "./Canonical.js"
import { Tier } from "./Determination.js"
import { NonEmptyText, toPointer } from "./Json.js"
import { jsonFitOf } from "./JsonFit.js"
import { FieldError, fieldErrorsOf, ProhibitedField, ValidationFailed } from "./Problem.js"
import { PublicId } from "./PublicId.js"

export const ReceiptSchemaId = "pv-reliance-receipt-v1" as const

/** Names the caller chooses; bounded so the idempotency key always fits one index entry. */
const Name = NonEmptyText.check(Schema.isMaxLength(256))

export const ClaimScope = Schema.Array(Name).check(Schema.isMinLength(1), Schema.isMaxLength(32)).annotate({
  description: "Claim names relied upon (1..32); each must be allowed and not a prohibited inference"
})

/** docs/API.md §9.1: exactly the 7 caller fields, for receipts and for actionability. */
export const RelianceRequest = Schema.Struct({
  tenant_id: TenantId,
  organization: Name.annotate({ description: "Consuming organization" }),
  principal: Name.annotate({ description: "Consuming principal" }),
  subject_public_id: PublicId,
  purpose_id: Name.annotate({ description: "Purpose of reliance, as named in the policy (GET /api/v1/policy)" }),
  requested_action: Name.annotate({ description: "Action the caller wants to take, as named under the purpose in the policy" }),
  claim_scope: ClaimScope
}).annotate({
  identifier: "RelianceRequest",
  description: "The caller's identity and intended use. Every decision field is derived by the server.",
  examples: [{
    tenant_id: "demo",
    organization: "Acme Buyers",
    principal: "alice",
    subject_public_id: PublicId.make("DET-V1-ACME-ROBOTICS-0001"),
    purpose_id: "supplier-onboarding",
    requested_action: "screen",
    claim_scope: ["identity"]
  }]
})
export type RelianceRequest = typeof RelianceRequest.Type

/** Fields the server derives; a caller that sends one is refused with prohibited-field (the list of docs/API.md §9.1). */
export const ProhibitedRequestFields = [
  "decision",
  "trust_state_digest",
  "policy_version",
  "policy_digest",
  "tier",
  "verdicts",
  "authority_state",
  "lifecycle_state",
  "determination_id"
] as const

/**
 * The endpoint payload: any JSON value reaches the handler, so the prohibited-field check sees the raw
 * body before validation; OpenAPI still documents the 7-field body through the surrogate.
 */
export const RelianceRequestBody = Schema.Json.check(Schema.makeFilter(() => true, {
  representation: { id: "pv/RelianceRequestBody", payload: null, schemas: [RelianceRequest.ast] },
  toJsonSchema: ({ schemas }) => schemas[0] ?? {}
}))

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const decodeStrict = Schema.decodeUnknownResult(RelianceRequest, { errors: "all", onExcessProperty: "error" })

/**
 * The schema decoder's answer for the usual body, cheaper: RelianceRequest's JSON codec is the identity (strings
 * and arrays of strings with checks), so a body that fits it exactly (its 7 members in order, each valid, nothing
 * else: JsonFit.ts) is its own decoded value, at a fraction of the decoder's cost on every receipt. Any other
 * body (one that fails, or holds its members in another order) goes through the decoder, for its errors or its copy.
 */
const fitsExactly = (() => {
  const fit = jsonFitOf(SchemaAST.flip(Schema.toCodecJson(RelianceRequest).ast))
  if (fit === undefined) throw new Error("RelianceRequest left the subset of schemas JsonFit.ts checks")
  return (body: unknown): body is RelianceRequest => {
    try {
      return fit(body)
    } catch {
      return false
    }
  }
})()

/** Raw body → request: prohibited fields first (one error each), then the 7-field schema with pointers. */
export const decodeRelianceRequest = (body: unknown): Result.Result<RelianceRequest, ProhibitedField | ValidationFailed> => {
  // A body that fits has no member beyond the 7, so none of the prohibited ones either.
  if (fitsExactly(body)) return Result.succeed(body)
  const prohibited = isObject(body)
    ? Object.keys(body).filter((key) => (ProhibitedRequestFields as ReadonlyArray<string>).includes(key))
    : []
  if (prohibited.length > 0) {
    return Result.fail(new ProhibitedField({
      detail: `The server derives ${prohibited.join(", ")}; a request must not send ${prohibited.length === 1 ? "it" : "them"}.`,
      errors: prohibited.map((key) => new FieldError({ pointer: toPointer([key]), detail: "is derived by the server and must not be sent" }))
    }))
  }
  return Result.mapError(decodeStrict(body), (error) =>
    new ValidationFailed({
      detail: "The request body failed validation.",
      errors: fieldErrorsOf(error.issue)
    }))
}

export const Checks = ["freshness", "lifecycle", "authority", "tier", "eligibility", "claim_scope"] as const
export type Check = typeof Checks[number]

export const Verdict = Schema.Struct({
  check: Schema.Literals(Checks),
  outcome: Schema.Literals(["PASS", "FAIL"]),
  reason: Schema.String
}).annotate({ identifier: "Verdict" })
export type Verdict = typeof Verdict.Type

export const Decision = Schema.Literals(["ACTIONABLE", "NOT_ACTIONABLE"]).annotate({ identifier: "Decision" })
export type Decision = typeof Decision.Type

/** One evaluation of a request against the trust document and the policy; what POST /actionability returns. */
export const ActionabilityEvaluation = Schema.Struct({
  tenant_id: Schema.String,
  organization: Schema.String,
  principal: Schema.String,
  subject_public_id: Schema.String,
  purpose_id: Schema.String,
  requested_action: Schema.String,
  claim_scope: Schema.Array(Schema.String),
  determination_id: Schema.String,
  determination_digest: Schema.String,
  trust_state_digest: Schema.String,
  policy_version: Schema.String,
  policy_digest: Schema.String,
  tier: Tier,
  lifecycle_state: LifecycleState,
  freshness_state: FreshnessState,
  decision: Decision,
  verdicts: Schema.Array(Verdict),
  authority_state: Schema.Literal("ISSUANCE_NOT_AUTHORIZED"),
  credential_state: Schema.Literal("NOT_ISSUED")
}).annotate({ identifier: "ActionabilityEvaluation", description: "Verdicts in their fixed order and the decision; nothing is stored" })
export type ActionabilityEvaluation = typeof ActionabilityEvaluation.Type

/** Everything a receipt states; receipt_digest covers exactly this object. */
export const ReceiptSnapshot = Schema.Struct({
  schema: Schema.Literal(ReceiptSchemaId),
  receipt_id: Schema.String,
  created_at: Schema.String,
  ...ActionabilityEvaluation.fields
}).annotate({ identifier: "ReceiptSnapshot" })
export type ReceiptSnapshot = typeof ReceiptSnapshot.Type

/** The service's signature of a receipt (docs/API.md §9.4); outside snapshot_payload, so the digest is unchanged. */
export const ReceiptSignature = Schema.Struct({
  alg: Schema.Literal("Ed25519"),
  kid: Schema.String.annotate({ description: "Key id of the signing key, listed at /api/v1/events/keys" }),
  sig: Schema.String.annotate({ description: "base64url (no padding) Ed25519 signature over the UTF-8 of \"pv-receipt-v1\\n\" + receipt_digest" })
}).annotate({ identifier: "ReceiptSignature" })
export type ReceiptSignature = typeof ReceiptSignature.Type

/** A receipt before it is signed: the snapshot's fields, the snapshot itself and its digest. */
export const SealedReceipt = Schema.Struct({
  ...ReceiptSnapshot.fields,
  snapshot_payload: ReceiptSnapshot,
  receipt_digest: Schema.String
})
export type SealedReceipt = typeof SealedReceipt.Type

/** A stored receipt, as GET returns it: the sealed receipt and the service's signature of its digest. */
export const RelianceReceipt = Schema.Struct({
  ...SealedReceipt.fields,
  signature: ReceiptSignature
}).annotate({ identifier: "RelianceReceipt", description: "Reliance receipt, schema pv-reliance-receipt-v1" })
export type RelianceReceipt = typeof RelianceReceipt.Type

/** What POST answers: the receipt plus whether it already existed. */
export const CreatedRelianceReceipt = Schema.Struct({
  ...RelianceReceipt.fields,
  idempotent: Schema.Boolean
}).annotate({ identifier: "CreatedRelianceReceipt" })
/**
 * POST's two answers, told apart by `idempotent`: a receipt stored by this request, and the replay of one
 * held already. The endpoint gives each its status (src/receipts/Api.ts), which is where the handler
 * takes it from; the members and their order are CreatedRelianceReceipt's.
 */
export const NewRelianceReceipt = Schema.Struct({ ...RelianceReceipt.fields, idempotent: Schema.Literal(false) })
  .annotate({ identifier: "NewRelianceReceipt", description: "A reliance receipt this request stored (idempotent: false)" })
export const ReplayedRelianceReceipt = Schema.Struct({ ...RelianceReceipt.fields, idempotent: Schema.Literal(true) })
  .annotate({ identifier: "ReplayedRelianceReceipt", description: "The reliance receipt held for this request's idempotency key (idempotent: true)" })
/** What POST answers, either of the two (the type of the MCP tool's output too). */
export type CreatedRelianceReceipt = typeof NewRelianceReceipt.Type | typeof ReplayedRelianceReceipt.Type

/**
 * The receipt digest recipe: SHA-256 over the JCS form of snapshot_payload. The JCS text is the one-pass
 * writer's (verify/FastJcs.ts), which is `canonicalize`'s text for any value (a property test holds them
 * together) at a fraction of its cost: a snapshot is plain JSON data.
 */
export const receiptDigestOf = (snapshot: ReceiptSnapshot): string => {
  const text = jcs(snapshot)
  if (text === undefined) throw new TypeError("a receipt snapshot has no canonical JSON form")
  return sha256Hex(text)
}

/**
 * Every member name a snapshot holds, at any depth (ReceiptSnapshot's and Verdict's), sorted by UTF-16 code
 * units: JCS's member order. JSON.stringify with this list writes each object's members in this order and
 * nothing else, with JCS's strings; a snapshot holds no numbers. So for a snapshot this service builds
 * (`sealReceipt`: exactly these members, strings without lone surrogates) the text is its JCS form. Not for
 * snapshots from elsewhere: a member outside the list would be left out, so verifiers use `receiptDigestOf`.
 * test/domain/receiptDigest.test.ts holds the two together.
 */
const SnapshotMembers: ReadonlyArray<string> = [...new Set([...Object.keys(ReceiptSnapshot.fields), ...Object.keys(Verdict.fields)])].sort()
const TopMembers = SnapshotMembers.filter((member) => member in ReceiptSnapshot.fields)
const VerdictMembers = SnapshotMembers.filter((member) => member in Verdict.fields)

/** `value`'s members of `members`, in that order, in a new object. */
const inMemberOrder = (value: object, members: ReadonlyArray<string>): Record<string, unknown> => {
  const copy: Record<string, unknown> = {}
  for (const member of members) copy[member] = (value as Record<string, unknown>)[member]
  return copy
}

/**
 * The JCS text of a snapshot `sealReceipt` is given (see SnapshotMembers). The same text as JSON.stringify with
 * the list, at half its cost: a copy built in the list's order (each verdict likewise) is written on V8's fast
 * path, which a replacer list leaves. A snapshot whose verdicts are not objects takes the list.
 */
export const sealedSnapshotText = (snapshot: ReceiptSnapshot): string => {
  const verdicts: unknown = snapshot.verdicts
  if (!Array.isArray(verdicts) || !verdicts.every((verdict) => typeof verdict === "object" && verdict !== null)) {
    return JSON.stringify(snapshot, SnapshotMembers as Array<string>)
  }
  const copy = inMemberOrder(snapshot, TopMembers)
  copy.verdicts = verdicts.map((verdict: object) => inMemberOrder(verdict, VerdictMembers))
  return JSON.stringify(copy)
}

/** A receipt this service makes: the snapshot's members, the snapshot, and its digest. */
export const sealReceipt = (snapshot: ReceiptSnapshot): SealedReceipt => ({
  ...snapshot,
  snapshot_payload: snapshot,
  receipt_digest: sha256Hex(sealedSnapshotText(snapshot))
})
