import { verify as verifySignature, createPublicKey } from "node:crypto"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Result } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { encodeTime } from "ulid"
import { verifyReceipt } from "../../src/client/index.js"
import { PublicId } from "../../src/domain/PublicId.js"
import { decodeRelianceRequest } from "../../src/domain/Receipt.js"
import { privateKeyFromSeed, signerFromPrivateKey, testSigningSeed } from "../../src/events/Signer.js"
import { receiptSigningInputOf } from "../../src/log/Entries.js"
import { Receipts } from "../../src/receipts/Receipts.js"
import { Determinations } from "../../src/trust/Determinations.js"
import { TrustResolver } from "../../src/trust/TrustResolver.js"
import { DAY_MS, determinationBody, relianceRequest } from "../support/fixtures.js"
import { overTestDatabase } from "../support/serviceDatabase.js"

/**
 * The real Receipts service in-process (Receipts.layerTest: the test signing key, deterministic ids) on
 * embedded PGlite, under @effect/vitest's TestClock. A second instance of the service (`freshInstance`,
 * built again over the same database, with nothing in its memory) stands for another process.
 */
const T0 = Date.parse("2026-03-01T00:00:00.000Z")
const subject = PublicId.make("DET-V1-SVC-RCPT")

// The public half of the fixed test key, derived here from its seed, not read from the service.
const testPrivateKey = privateKeyFromSeed(testSigningSeed)
const testPublicKey = createPublicKey(testPrivateKey)
const testKid = signerFromPrivateKey(testPrivateKey, "seed").kid

/** A request decoded as the edge decodes it. */
const requestOf = (principal: string, overrides: Record<string, unknown> = {}) => {
  const decoded = decodeRelianceRequest(relianceRequest(subject, principal, overrides))
  if (Result.isFailure(decoded)) throw new Error(`fixture request refused: ${JSON.stringify(decoded.failure)}`)
  return decoded.success
}

/**
 * Runs `f` against another instance of the service over the same database: nothing held in memory.
 * `Layer.fresh`, or the memo map of the test's layer would hand back the instance it already built.
 */
const freshInstance = <A, E>(f: (receipts: typeof Receipts.Service) => Effect.Effect<A, E>) =>
  Effect.flatMap(Receipts, f).pipe(Effect.provide(Layer.fresh(Receipts.layerNoDeps)))

/** The subject's trust state, recorded once for the whole file (its tier T3 makes `approve` ACTIONABLE). */
const recorded = Effect.gen(function*() {
  const determinations = yield* Determinations
  const found = yield* Effect.exit(determinations.current(subject))
  if (found._tag === "Failure") yield* determinations.ingest(subject, determinationBody(T0 - DAY_MS, { tier: "T3" }))
})

describe("Receipts (service, in-process)", () => {
  layer(overTestDatabase(Receipts.layerTest), { timeout: 120_000 })((it) => {
    it.effect("derives every decision field itself: the evaluation, the trust document, the policy, the clock and the ids", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        yield* recorded
        const receipts = yield* Receipts
        const now = T0 + 42_000
        yield* TestClock.setTime(now)
        const request = requestOf("agent:derive")
        const receipt = yield* receipts.create("tenant-a", request)
        const evaluation = yield* receipts.evaluate("tenant-a", request)
        const trust = yield* Effect.flatMap(TrustResolver, (r) => r.resolve(subject))

        assert.strictEqual(receipt.idempotent, false)
        assert.strictEqual(receipt.created_at, new Date(now).toISOString())
        // The test Ids: the clock's instant, then a counter.
        assert.match(receipt.receipt_id, new RegExp(`^rr_${encodeTime(now, 10)}0{14}[0-9A-Z]{2}$`))
        assert.deepStrictEqual({ ...receipt.snapshot_payload, schema: undefined, receipt_id: undefined, created_at: undefined }, {
          ...evaluation,
          schema: undefined,
          receipt_id: undefined,
          created_at: undefined
        })
        assert.strictEqual(receipt.decision, "ACTIONABLE")
        assert.strictEqual(receipt.tier, "T3")
        assert.strictEqual(receipt.determination_id, trust.determination.determination_id)
        assert.strictEqual(receipt.determination_digest, trust.determination.determination_digest)
        assert.strictEqual(receipt.trust_state_digest, trust.trust_state_digest)
        assert.strictEqual(receipt.policy_digest, receipts.policy.policy_digest)
        assert.strictEqual(receipt.policy_version, receipts.policy.policy_version)
        assert.isTrue(verifyReceipt(receipt))

        // A request the policy refuses is still a receipt, NOT_ACTIONABLE, with the failing check named.
        const refused = yield* receipts.create("tenant-a", requestOf("agent:refused", { claim_scope: ["identity", "credential_issued"] }))
        assert.strictEqual(refused.decision, "NOT_ACTIONABLE")
        assert.deepStrictEqual(refused.verdicts.filter((v) => v.outcome === "FAIL").map((v) => v.check), ["claim_scope"])
      }))

    it.effect("signs every receipt with the service key: the signature verifies under the test key's public key", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        yield* recorded
        const receipt = yield* Effect.flatMap(Receipts, (r) => r.create("tenant-a", requestOf("agent:signed")))
        assert.deepStrictEqual({ alg: receipt.signature.alg, kid: receipt.signature.kid }, { alg: "Ed25519", kid: testKid })
        const signature = Buffer.from(receipt.signature.sig, "base64url")
        assert.isTrue(verifySignature(null, receiptSigningInputOf(receipt.receipt_digest), testPublicKey, signature))
        // Over any other digest it does not verify: the signature covers this receipt's digest.
        assert.isFalse(verifySignature(null, receiptSigningInputOf("0".repeat(64)), testPublicKey, signature))
      }))

    it.effect("is idempotent: the same key and intent answer the stored receipt, a changed intent is a conflict, on any instance", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        yield* recorded
        const receipts = yield* Receipts
        const first = yield* receipts.create("tenant-a", requestOf("agent:idem"))
        yield* TestClock.adjust(60_000)

        const again = yield* receipts.create("tenant-a", requestOf("agent:idem"))
        assert.deepStrictEqual(again, { ...first, idempotent: true })
        // Another instance holds nothing: it finds the receipt through the database's unique key.
        const elsewhere = yield* freshInstance((other) => other.create("tenant-a", requestOf("agent:idem")))
        assert.deepStrictEqual(elsewhere, { ...first, idempotent: true })

        for (const change of [{ organization: "Another Org" }, { claim_scope: ["identity", "assurance"] }, { claim_scope: ["assurance"] }]) {
          const here = yield* Effect.flip(receipts.create("tenant-a", requestOf("agent:idem", change)))
          assert.strictEqual(here._tag, "IdempotencyConflict", JSON.stringify(change))
          const there = yield* Effect.flip(freshInstance((other) => other.create("tenant-a", requestOf("agent:idem", change))))
          assert.strictEqual(there._tag, "IdempotencyConflict", JSON.stringify(change))
        }
        // The stored receipt is still the first one.
        const { idempotent: _, ...stored } = first
        assert.deepStrictEqual(yield* freshInstance((other) => other.get("tenant-a", first.receipt_id)), stored)
      }))

    it.effect("keys receipts on the determination: after it changes the same request is a new receipt, the old one unchanged", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const receipts = yield* Receipts
        const id = PublicId.make("DET-V1-SVC-RCPT-CHANGES")
        const determinations = yield* Determinations
        const body = determinationBody(T0 - DAY_MS, { tier: "T3", subject: { subject_id: "sub_changes", physical_subject_id: "phys_c", identity_state: "VERIFIED" } })
        yield* determinations.ingest(id, body)
        const request = requestOf("agent:changes", { subject_public_id: id })
        const before = yield* receipts.create("tenant-a", request)

        yield* determinations.ingest(id, { ...body, tier: "T1" })
        const after = yield* receipts.create("tenant-a", request)
        assert.strictEqual(after.idempotent, false)
        assert.notStrictEqual(after.receipt_id, before.receipt_id)
        assert.strictEqual(after.tier, "T1")
        assert.strictEqual(after.decision, "NOT_ACTIONABLE")
        const { idempotent: _, ...stored } = before
        assert.deepStrictEqual(yield* receipts.get("tenant-a", before.receipt_id), stored)
      }))

    it.effect("keeps tenants apart, in memory and in the database, and checks the purpose before the subject", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        yield* recorded
        const receipts = yield* Receipts
        const receipt = yield* receipts.create("tenant-a", requestOf("agent:tenant"))
        assert.strictEqual((yield* Effect.flip(receipts.get("tenant-b", receipt.receipt_id)))._tag, "ReceiptNotFound")
        assert.strictEqual((yield* Effect.flip(freshInstance((other) => other.get("tenant-b", receipt.receipt_id))))._tag, "ReceiptNotFound")
        assert.strictEqual((yield* freshInstance((other) => other.get("tenant-a", receipt.receipt_id))).receipt_id, receipt.receipt_id)
        // The request's tenant must be the key's.
        assert.strictEqual((yield* Effect.flip(receipts.create("tenant-b", requestOf("agent:tenant"))))._tag, "Forbidden")
        // An unknown purpose is refused whether or not the subject exists.
        const unknownPurpose = requestOf("agent:tenant", { purpose_id: "no-such-purpose", subject_public_id: "DET-V1-SVC-NOBODY" })
        assert.strictEqual((yield* Effect.flip(receipts.create("tenant-a", unknownPurpose)))._tag, "UnknownPurpose")
        const unknownSubject = requestOf("agent:tenant", { subject_public_id: "DET-V1-SVC-NOBODY" })
        assert.strictEqual((yield* Effect.flip(receipts.create("tenant-a", unknownSubject)))._tag, "DeterminationNotFound")
      }))

    it.effect("signs a receipt stored without a signature when it is read, once, with the signature it would have had", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        yield* recorded
        const sql = yield* SqlClient.SqlClient
        const receipt = yield* Effect.flatMap(Receipts, (r) => r.create("tenant-a", requestOf("agent:unsigned")))
        yield* Effect.orDie(sql`UPDATE reliance_receipts SET receipt = (receipt::jsonb - 'signature')::json WHERE receipt_id = ${receipt.receipt_id}`)
        const stored = () =>
          Effect.orDie(sql<{ receipt: { signature?: unknown } }>`SELECT receipt FROM reliance_receipts WHERE receipt_id = ${receipt.receipt_id}`)
        assert.isUndefined((yield* stored())[0]!.receipt.signature)

        const read = yield* freshInstance((other) => other.get("tenant-a", receipt.receipt_id))
        assert.deepStrictEqual(read.signature, receipt.signature)
        assert.deepStrictEqual((yield* stored())[0]!.receipt.signature, receipt.signature)
      }))
  })
})
