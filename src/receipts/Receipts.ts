import { Clock, Context, Duration, Effect, Layer, Option, Result } from "effect"
import {
  type DeterminationNotFound,
  Forbidden,
  IdempotencyConflict,
  type NotYetLogged,
  ReceiptNotFound,
  type UnknownPurpose
} from "../domain/Problem.js"
import {
  type ActionabilityEvaluation,
  type CreatedRelianceReceipt,
  ReceiptSchemaId,
  RelianceReceipt,
  type RelianceRequest,
  type SealedReceipt,
  sealReceipt
} from "../domain/Receipt.js"
import type { EventJwk } from "../domain/TrustEvent.js"
import type { MachineTrustResponse } from "../domain/MachineTrust.js"
import { EventLog } from "../events/EventLog.js"
import { signReceiptDigest } from "../log/Entries.js"
import { LogNudge } from "../log/LogNudge.js"
import type { ReceiptProofBundle, SignedRelianceReceipt } from "../log/ReceiptProof.js"
import { tlogProofOf, transparentStatementOf } from "../log/ReceiptFormats.js"
import { jsonTextEncoder } from "../domain/Json.js"
import { EvidenceMediaTypes, type EvidenceKind } from "../verify/Evidence.js"
import { TransparencyLog } from "../log/TransparencyLog.js"
import { countReceipt } from "../observability/Metrics.js"
import { Ids } from "../platform/Ids.js"
import { TrustResolver } from "../trust/TrustResolver.js"
import { type PolicyView, policyView } from "../domain/PolicyDocument.js"
import { Policy } from "../trust/Policy.js"
import { evaluateActionability, requireRule } from "./Actionability.js"
import { idempotencyKeyOf, receiptMemory } from "./ReceiptMemory.js"
import { ReceiptsRepo, type StoredReceipt } from "./Repo.js"

/** What evaluating a decoded request can fail with (a body that does not decode fails at the edge, before). */
export type EvaluationError = Forbidden | UnknownPurpose | DeterminationNotFound

/**
 * Same idempotency key, same intent: only organization and claim_scope can still differ. claim_scope is
 * an ordered list of strings, equal when they are equal element by element.
 */
const sameIntent = (stored: RelianceReceipt, requested: Pick<RelianceReceipt, "organization" | "claim_scope">) => {
  if (stored.organization !== requested.organization) return false
  const a = stored.claim_scope
  const b = requested.claim_scope
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

const conflict = () =>
  new IdempotencyConflict({
    detail: "A receipt with this idempotency key (tenant_id, principal, subject_public_id, purpose_id, " +
      "requested_action, determination_digest) exists with a different organization or claim_scope."
  })

/** `rr_` + a ULID (Crockford base 32), the only shape of receipt id ever issued. */
export const ReceiptIdPattern = /^rr_[0-9A-HJKMNP-TV-Z]{26}$/

/** Receipts signed per transaction by the start-up backfill. */
const BackfillBatch = 500

/**
 * The methods of `Receipts`. `create` and `get` are on the receipt endpoints' and MCP's hot paths (their
 * replays answer from memory): plain functions with no span; the rarer ones are `Effect.fn`s.
 */
/** The standard encodings of a receipt's proof, by the name the endpoints and MCP use. */
export type EvidenceFormat = Exclude<EvidenceKind, "bundle">

/** One encoded proof: its media type and body (text for the tlog-proof, CBOR bytes for the two COSE kinds). */
export interface Evidence {
  readonly format: EvidenceFormat
  readonly mediaType: string
  readonly body: string | Uint8Array
}

export interface ReceiptsShape {
  /** The decision `create` would record now, without recording anything. */
  readonly evaluate: (tenantId: string, request: RelianceRequest) => Effect.Effect<ActionabilityEvaluation, EvaluationError>
  /** A new signed receipt, or the one this intent already has (idempotent); a different intent under the same key is a conflict. */
  readonly create: (tenantId: string, request: RelianceRequest) => Effect.Effect<CreatedRelianceReceipt, EvaluationError | IdempotencyConflict>
  /** One of the tenant's receipts (signed when read if it was stored before signatures). */
  readonly get: (tenantId: string, receiptId: string) => Effect.Effect<RelianceReceipt, ReceiptNotFound>
  /** The receipt with its inclusion in the transparency log. */
  readonly proof: (tenantId: string, receiptId: string) => Effect.Effect<ReceiptProofBundle, ReceiptNotFound | NotYetLogged>
  /** The same facts as `proof` in a standard encoding (docs/API.md "Evidence in standard encodings"). */
  readonly evidence: (tenantId: string, receiptId: string, format: EvidenceFormat) => Effect.Effect<Evidence, ReceiptNotFound | NotYetLogged>
  /** A receipt's proof bundle once its entry is under a served checkpoint, waiting up to `ms` for it (none after). */
  readonly proofWithin: (receipt: RelianceReceipt, ms: number) => Effect.Effect<Option.Option<ReceiptProofBundle>>
  /** Signs receipts stored before signatures; succeeds with how many. */
  readonly backfillSignatures: Effect.Effect<number>
  /** The loaded policy as the API shows it. */
  readonly policy: PolicyView
}

const make = Effect.gen(function*() {
  const resolver = yield* TrustResolver
  const policy = yield* Policy
  const repo = yield* ReceiptsRepo
  const ids = yield* Ids
  const events = yield* EventLog
  const log = yield* TransparencyLog
  const nudges = yield* LogNudge
  // The service signing key of the events (docs/API.md §9.4) also signs receipts; its kid is in /events/keys.
  const sign = (receipt: SealedReceipt): RelianceReceipt => ({ ...receipt, signature: signReceiptDigest(receipt.receipt_digest, events.signer) })
  // Stored receipts never change: replays and reads are answered from memory (ReceiptMemory.ts) when held.
  const { replayOf, byId, remember } = receiptMemory()

  /**
   * A receipt stored before receipts were signed gets its signature now, stored once (the backfill
   * does the same in batches); a signed one is returned as stored.
   */
  const ensureSigned = (stored: StoredReceipt): Effect.Effect<RelianceReceipt> =>
    stored.signature !== undefined
      ? Effect.succeed(stored as RelianceReceipt)
      : Effect.orDie(repo.storeSignatures([sign(stored)])).pipe(
        Effect.flatMap(([receipt]) => receipt?.signature !== undefined ? Effect.succeed(receipt as RelianceReceipt) : Effect.die(new Error("a receipt signature was not stored")))
      )

  /** Signs every receipt the migration queued, a batch per transaction; safe on several instances at once. */
  const backfillSignatures: Effect.Effect<number> = Effect.gen(function*() {
    let signed = 0
    yield* Effect.orDie(repo.dropOrphanedBackfill)
    for (;;) {
      const batch = yield* Effect.orDie(repo.unsignedBatch(BackfillBatch))
      if (batch.length === 0) return signed
      yield* Effect.orDie(repo.storeSignatures(batch.map((receipt) => receipt.signature === undefined ? sign(receipt) : receipt as RelianceReceipt)))
      signed += batch.length
    }
  })
  yield* backfillSignatures.pipe(
    Effect.tap((signed) => signed > 0 ? Effect.logInfo(`signed ${signed} receipts stored before receipt signatures`) : Effect.void),
    Effect.catchCause((cause) => Effect.logWarning("receipt signature backfill failed; unsigned receipts are signed when read", cause)),
    Effect.delay(Duration.millis(10)),
    Effect.forkScoped
  )

  /**
   * Tenant, then purpose, then determination (the edge decoded the request): the checks every evaluation
   * and every receipt passes first, and the trust document they are made against.
   */
  const admit = (tenantId: string, request: RelianceRequest): Effect.Effect<MachineTrustResponse, EvaluationError> => {
    if (request.tenant_id !== tenantId) return Effect.fail(new Forbidden({ detail: "tenant_id must be the tenant of the API key." }))
    // The purpose is checked before resolving so an unknown purpose never depends on the determination.
    const rule = requireRule(policy, request)
    return Result.isFailure(rule) ? Effect.fail(rule.failure) : resolver.resolve(request.subject_public_id)
  }

  /** Nothing is stored. */
  const evaluate = (tenantId: string, request: RelianceRequest): Effect.Effect<ActionabilityEvaluation, EvaluationError> =>
    Effect.flatMap(admit(tenantId, request), (trust) => Effect.fromResult(evaluateActionability(trust, policy, request)))

  /** A new receipt for an evaluation whose idempotency key this process holds no receipt for. */
  const store = (evaluation: ActionabilityEvaluation): Effect.Effect<CreatedRelianceReceipt, IdempotencyConflict> =>
    Effect.gen(function*() {
      const createdAt = new Date(yield* Clock.currentTimeMillis).toISOString()
      const receipt = sign(sealReceipt({
        schema: ReceiptSchemaId,
        receipt_id: yield* ids.make("rr"),
        created_at: createdAt,
        ...evaluation
      }))
      const stored = yield* Effect.orDie(repo.insertOrFetch(receipt))
      if (stored.created) {
        yield* nudges.nudge
        remember(receipt)
        return { ...receipt, idempotent: false }
      }
      // Another request (or instance) stored this idempotency key first: its receipt is the answer.
      const signed = yield* ensureSigned(stored.receipt)
      remember(signed)
      if (!sameIntent(signed, receipt)) return yield* Effect.fail(conflict())
      return { ...signed, idempotent: true }
    })

  /**
   * A replay needs only the idempotency key, whose last member (determination_digest) comes from the
   * trust document: the verdicts are derived only for a receipt this process does not hold yet.
   */
  const create = (tenantId: string, request: RelianceRequest): Effect.Effect<CreatedRelianceReceipt, EvaluationError | IdempotencyConflict> =>
    Effect.flatMap(admit(tenantId, request), (trust): Effect.Effect<CreatedRelianceReceipt, EvaluationError | IdempotencyConflict> => {
      const replayed = replayOf(idempotencyKeyOf(request, trust.determination.determination_digest))
      if (replayed !== undefined) return sameIntent(replayed, request) ? Effect.as(countReceipt(true), replayed) : Effect.fail(conflict())
      const evaluation = evaluateActionability(trust, policy, request)
      return Result.isFailure(evaluation)
        ? Effect.fail(evaluation.failure)
        : Effect.tap(store(evaluation.success), (receipt) => countReceipt(receipt.idempotent))
    })

  const get = (tenantId: string, receiptId: string): Effect.Effect<RelianceReceipt, ReceiptNotFound> => {
    // An id this service could never have issued is not looked up at all.
    if (!ReceiptIdPattern.test(receiptId)) return Effect.fail(new ReceiptNotFound({ detail: "no such receipt" }))
    const known = byId.get(receiptId)
    if (known !== undefined && known.tenant_id === tenantId) return Effect.succeed(known)
    return Effect.orDie(repo.find(tenantId, receiptId)).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new ReceiptNotFound({ detail: `no receipt ${receiptId.slice(0, 80)}` })),
        onSome: ensureSigned
      })),
      Effect.tap((receipt) => Effect.sync(() => remember(receipt)))
    )
  }

  // Public keys never change, so each kid's JWK is read once.
  const receiptKeys = new Map<string, EventJwk>()
  const receiptKeyOf = (kid: string): Effect.Effect<EventJwk | undefined> => {
    const known = receiptKeys.get(kid)
    if (known !== undefined) return Effect.succeed(known)
    return Effect.map(events.jwks, (jwks) => {
      for (const jwk of jwks.keys) receiptKeys.set(jwk.kid, jwk)
      return receiptKeys.get(kid)
    })
  }

  /** GET /reliance-receipts/{id}/proof: the receipt (same tenant rule as `get`) with its inclusion in the log. */
  const proof = Effect.fn("Receipts.proof")(function*(tenantId: string, receiptId: string) {
    const receipt = yield* get(tenantId, receiptId)
    return yield* log.receiptBundle(receipt, yield* receiptKeyOf(receipt.signature.kid))
  })

  // The statement's payload is the receipt as GET returns it: its JSON through the same schema, then JCS.
  const receiptAsServed = jsonTextEncoder(RelianceReceipt)
  const statementSigner = {
    kid: events.signer.kid,
    sign: (input: Uint8Array) => new Uint8Array(Buffer.from(events.signer.sign(input), "base64url"))
  }

  /** GET /reliance-receipts/{id}/tlog-proof, /cose-receipt, /transparent-statement: the bundle's facts re-encoded. */
  const evidence = Effect.fn("Receipts.evidence")(function*(tenantId: string, receiptId: string, format: EvidenceFormat) {
    const receipt = yield* get(tenantId, receiptId)
    const bundle = yield* log.receiptBundle(receipt, undefined)
    const mediaType = EvidenceMediaTypes[format]
    if (format === "tlog-proof") return { format, mediaType, body: tlogProofOf(bundle) }
    const coseReceipt = log.coseReceipt(bundle)
    if (format === "cose-receipt") return { format, mediaType, body: coseReceipt }
    const served = JSON.parse(receiptAsServed(receipt)) as SignedRelianceReceipt
    return { format, mediaType, body: transparentStatementOf(served, coseReceipt, log.key.origin, statementSigner) }
  })

  /** POST /reliance-receipts with Prefer: wait (docs/API.md): the bundle GET …/proof would serve, once it exists. */
  const proofWithin = Effect.fn("Receipts.proofWithin")(function*(receipt: RelianceReceipt, ms: number) {
    return yield* log.receiptBundleWithin(receipt, yield* receiptKeyOf(receipt.signature.kid), ms)
  })

  return {
    // Once per request, answered from memory when held: no span (docs/ARCHITECTURE.md, the services rule).
    evaluate,
    create,
    get,
    proof,
    proofWithin,
    evidence,
    backfillSignatures: Effect.withSpan(backfillSignatures, "Receipts.backfillSignatures"),
    policy: policyView(policy)
  } satisfies ReceiptsShape
})

/**
 * Actionability evaluations and durable reliance receipts. Callers pass the decoded request and the
 * tenant of the authenticated key; every decision field is derived here from the canonical trust document.
 */
export class Receipts extends Context.Service<Receipts, ReceiptsShape>()("pv/Receipts", { make }) {
  static readonly layerNoDeps = Layer.effect(Receipts, make)
  static readonly layer = Receipts.layerNoDeps.pipe(
    Layer.provide([TrustResolver.layer, Policy.layer, ReceiptsRepo.layer, Ids.layer, EventLog.layer, TransparencyLog.layer, LogNudge.layer])
  )

  /**
   * The real service over `TrustResolver.layerTest` (test signer, deterministic ids, the caller's clock),
   * its dependencies in its output (Determinations to record the trust state a test needs).
   */
  static readonly layerTest = Receipts.layerNoDeps.pipe(
    Layer.provideMerge(Layer.mergeAll(ReceiptsRepo.layer, TransparencyLog.layer)),
    Layer.provideMerge(TrustResolver.layerTest)
  )
}
