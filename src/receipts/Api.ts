import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { AnyKey, ApiKeyAuth, RequiredScope } from "../api/Auth.js"
import {
  DeterminationNotFound,
  Forbidden,
  IdempotencyConflict,
  NotYetLogged,
  ProhibitedField,
  ReceiptNotFound,
  UnknownPurpose,
  ValidationFailed
} from "../domain/Problem.js"
import { ActionabilityEvaluation, NewRelianceReceipt, RelianceReceipt, RelianceRequestBody, ReplayedRelianceReceipt } from "../domain/Receipt.js"
import { ReceiptProofBundle } from "../log/Api.js"
import { PolicyView } from "../domain/PolicyDocument.js"
import { CoseReceiptMediaType, TransparentStatementMediaType } from "../verify/Cose.js"
import { TlogProofMediaType } from "../verify/TlogProof.js"

const evidenceRules =
  "Same tenant rule as GET receipt. Before the receipt's entry is under a served checkpoint (with the witness quorum when " +
  "witnesses are configured): 404 not-yet-logged with Retry-After: 1. docs/API.md shows an annotated example."

/** POST's answers may carry the proof bundle (Prefer: wait, docs/API.md): the one GET …/proof serves. */
// One schema for both answers, so OpenAPI names one component for it.
const ProofMember = Schema.optionalKey(ReceiptProofBundle).annotate({
  description: "Present only when the request sent Prefer: wait=<1-10> and the receipt's entry was under a served checkpoint in time"
})
const withProof = <S extends typeof NewRelianceReceipt | typeof ReplayedRelianceReceipt>(schema: S) =>
  Schema.Struct({ ...schema.fields, proof: ProofMember }).annotate({ identifier: schema.ast.annotations?.identifier as string, description: schema.ast.annotations?.description as string })

const NewRelianceReceiptAnswer = withProof(NewRelianceReceipt)
const ReplayedRelianceReceiptAnswer = withProof(ReplayedRelianceReceipt)
/** What POST /reliance-receipts answers: the receipt (201 new, 200 replay), with `proof` when it waited for it. */
export type CreatedRelianceReceiptAnswer = typeof NewRelianceReceiptAnswer.Type | typeof ReplayedRelianceReceiptAnswer.Type

const ReceiptPath = { receiptId: Schema.String.annotate({ description: "rr_ + ULID" }) }

/** GET /reliance-receipts/{id}/<format>: the proof bundle's facts in one standard encoding. */
const evidenceEndpoint = <const Name extends string, S extends Schema.Top>(name: Name, format: string, success: S, summary: string, description: string) =>
  HttpApiEndpoint.get(name, `/reliance-receipts/:receiptId/${format}`, { params: ReceiptPath, success, error: [ReceiptNotFound, NotYetLogged] })
    .annotate(RequiredScope, "receipt:read")
    .annotate(OpenApi.Summary, summary)
    .annotate(OpenApi.Description, `${description} ${evidenceRules}`)

export class ReceiptsApi extends HttpApiGroup.make("receipts")
  .add(
    HttpApiEndpoint.post("create", "/reliance-receipts", {
      payload: RelianceRequestBody,
      // The status of each answer is declared here only: src/receipts/Http.ts reads it off these schemas.
      success: [NewRelianceReceiptAnswer.pipe(HttpApiSchema.status(201)), ReplayedRelianceReceiptAnswer.pipe(HttpApiSchema.status(200))],
      error: [ProhibitedField, ValidationFailed, Forbidden, UnknownPurpose, DeterminationNotFound, IdempotencyConflict]
    })
      .annotate(RequiredScope, "receipt:write")
      .annotate(OpenApi.Summary, "Create a reliance receipt")
      .annotate(OpenApi.Description,
        "Send only the 7 caller fields; the server resolves canonical trust, evaluates the policy and derives every " +
        "decision field. Sending a server-derived field (decision, trust_state_digest, policy_version, policy_digest, " +
        "tier, verdicts, authority_state, lifecycle_state, determination_id) is refused with 422 prohibited-field. " +
        "201 when stored; 200 with `idempotent: true` for the same (tenant_id, principal, subject_public_id, purpose_id, " +
        "requested_action, determination_digest); 409 when that key exists with another organization or claim_scope. " +
        "Verify `receipt_digest` = SHA-256 of the RFC 8785 form of `snapshot_payload`. With `Prefer: wait=<1-10>` (RFC 7240) the " +
        "answer waits up to that many seconds for the receipt's log entry to be under a served checkpoint (witness quorum " +
        "included) and then carries `proof` (the GET …/proof bundle) and `Preference-Applied: wait=<n>`; if time runs out, " +
        "the same answer without either. Other or malformed preferences are ignored.")
  )
  .add(
    HttpApiEndpoint.get("get", "/reliance-receipts/:receiptId", {
      params: ReceiptPath,
      success: RelianceReceipt,
      error: ReceiptNotFound
    })
      .annotate(RequiredScope, "receipt:read")
      .annotate(OpenApi.Summary, "Read a stored reliance receipt")
      .annotate(OpenApi.Description, "Receipts are immutable and visible to their own tenant only; another tenant's id is 404.")
  )
  .add(
    HttpApiEndpoint.get("proof", "/reliance-receipts/:receiptId/proof", {
      params: ReceiptPath,
      success: ReceiptProofBundle,
      error: [ReceiptNotFound, NotYetLogged]
    })
      .annotate(RequiredScope, "receipt:read")
      .annotate(OpenApi.Summary, "A receipt's proof bundle: signed receipt, log entry, inclusion path, checkpoint")
      .annotate(OpenApi.Description,
        "Everything needed to verify offline (`pv verify-receipt`, or the package's `verifyReceiptBundle`) that the receipt " +
        "is what the service signed and that the transparency log holds it under a signed checkpoint. Pin verifier_key " +
        "(GET /log/key) and the receipt key (GET /events/keys) rather than trusting the bundle's own. Same tenant rule as " +
        "GET receipt. Before the receipt's entry is integrated (normally well under 2 s): 404 not-yet-logged with Retry-After: 1.")
  )
  .add(
    evidenceEndpoint("tlogProof", "tlog-proof", Schema.String.pipe(HttpApiSchema.asText({ contentType: TlogProofMediaType })),
      "The receipt's proof as a C2SP tlog-proof@v1",
      "The proof bundle's facts as https://c2sp.org/tlog-proof: `extra` is the receipt's log entry (JCS bytes), then the " +
        "index, the inclusion path and the served checkpoint with its cosignatures."),
    evidenceEndpoint("coseReceipt", "cose-receipt", Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: CoseReceiptMediaType })),
      "The receipt's inclusion as an RFC 9942 COSE Receipt (RFC9162_SHA256)",
      "A tagged COSE_Sign1 signed by the log key (kid = its C2SP key ID) over the Merkle root of the served checkpoint's " +
        "tree; the leaf is the receipt's log entry."),
    evidenceEndpoint("transparentStatement", "transparent-statement",
      Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: TransparentStatementMediaType })),
      "The receipt as an RFC 9943 SCITT Transparent Statement",
      "A tagged COSE_Sign1 by the receipt-signing key (kid = its JWKS kid) whose payload is the receipt's JCS bytes, with " +
        "the COSE Receipt in its unprotected header (394).")
  )
  .add(
    HttpApiEndpoint.post("evaluate", "/actionability", {
      payload: RelianceRequestBody,
      success: ActionabilityEvaluation,
      error: [ProhibitedField, ValidationFailed, Forbidden, UnknownPurpose, DeterminationNotFound]
    })
      .annotate(RequiredScope, "actionability:read")
      .annotate(OpenApi.Summary, "Evaluate actionability without storing anything")
      .annotate(OpenApi.Description,
        "The same 7 fields, checks and verdicts as a receipt (freshness, lifecycle, authority, tier, eligibility, " +
        "claim_scope); ACTIONABLE only when every verdict passes. Nothing is persisted.")
  )
  .add(
    HttpApiEndpoint.get("policy", "/policy", { success: PolicyView })
      .annotate(RequiredScope, AnyKey)
      .annotate(OpenApi.Summary, "The current reliance policy")
      .annotate(OpenApi.Description, "policy_digest is the RFC 8785 SHA-256 of the document without policy_digest.")
  )
  // Every endpoint of the group sits behind the API key (its 401, 403 and 429 are ApiKeyAuth's declared errors).
  .middleware(ApiKeyAuth)
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "Reliance receipts and actionability") {}
