// What (r') and (r0) share: a new receipt's work written plainly, with the service's own domain functions and ids.
// The trust document is looked up by the request's subject in a Map (BENCH_DOCUMENT_FILE's under BENCH_PUBLIC_ID);
// the evaluation against it and policy/policy.v1.json, `sealReceipt`'s RFC 8785 digest, the Ed25519 signature of
// the digest and the log entry's bytes; then one autocommitted statement per request through @effect/sql-pg with
// the service's pool size (16): the receipt row (`ON CONFLICT … DO NOTHING` on the idempotency key) and its pending
// log entry, in tables laid out as the service's migrations lay them out. DATABASE_URL: a database of its own.
import { generateKeyPairSync } from "node:crypto"
import { readFileSync } from "node:fs"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Result, Schema } from "effect"
import { MachineTrustResponse } from "../../src/domain/MachineTrust.js"
import { loadPolicy, PolicyDocument } from "../../src/domain/PolicyDocument.js"
import { ReceiptSchemaId, type RelianceReceipt, type RelianceRequest, sealReceipt } from "../../src/domain/Receipt.js"
import { signerFromPrivateKey } from "../../src/events/Signer.js"
import { entryBytesOf, receiptEntryOf, signReceiptDigest } from "../../src/log/Entries.js"
import { Ids } from "../../src/platform/Ids.js"
import { evaluateActionability } from "../../src/receipts/Actionability.js"

const trustBySubject = new Map([
  [process.env.BENCH_PUBLIC_ID!, Schema.decodeUnknownSync(MachineTrustResponse)(JSON.parse(readFileSync(process.env.BENCH_DOCUMENT_FILE!, "utf8")))]
])
const policy = loadPolicy(Schema.decodeUnknownSync(PolicyDocument)(JSON.parse(readFileSync("policy/policy.v1.json", "utf8"))))
const signer = signerFromPrivateKey(generateKeyPairSync("ed25519").privateKey, "ephemeral")

/** Why a request made no receipt: another tenant's, an unknown subject or purpose, or its idempotency key is taken. */
export type Refusal = "forbidden" | "not-found" | "conflict"

/** The database and the ids the work needs. */
export const ReceiptWorkLive = Layer.merge(PgClient.layer({ url: Redacted.make(process.env.DATABASE_URL!), maxConnections: 16 }), Ids.layer)

/** Creates the two tables, then answers each request with its new receipt or why none was made. */
export const makeReceiptWork = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient
  const ids = yield* Ids
  yield* sql`
    CREATE TABLE IF NOT EXISTS reliance_receipts (
      receipt_id text PRIMARY KEY, tenant_id text NOT NULL, principal text NOT NULL, subject_public_id text NOT NULL,
      purpose_id text NOT NULL, requested_action text NOT NULL, determination_digest text NOT NULL,
      determination_id text NOT NULL, decision text NOT NULL, receipt_digest text NOT NULL, receipt json NOT NULL,
      created_at timestamptz NOT NULL,
      UNIQUE (tenant_id, principal, subject_public_id, purpose_id, requested_action, determination_digest))`
  yield* sql`CREATE INDEX IF NOT EXISTS reliance_receipts_subject ON reliance_receipts (subject_public_id, created_at)`
  yield* sql`
    CREATE TABLE IF NOT EXISTS log_pending (
      id bigserial PRIMARY KEY, kind text NOT NULL CHECK (kind IN ('receipt', 'event')), ref text NOT NULL,
      entry bytea NOT NULL, UNIQUE (kind, ref))`
  return (tenantId: string, payload: RelianceRequest): Effect.Effect<Result.Result<RelianceReceipt, Refusal>> =>
    Effect.gen(function*() {
      if (payload.tenant_id !== tenantId) return Result.fail("forbidden" as const)
      const trust = trustBySubject.get(payload.subject_public_id)
      if (trust === undefined) return Result.fail("not-found" as const)
      const evaluation = evaluateActionability(trust, policy, payload)
      if (Result.isFailure(evaluation)) return Result.fail("forbidden" as const)
      const receiptId = yield* ids.make("rr")
      const now = Date.now()
      const sealed = sealReceipt({ schema: ReceiptSchemaId, receipt_id: receiptId, created_at: new Date(now).toISOString(), ...evaluation.success })
      const receipt = { ...sealed, signature: signReceiptDigest(sealed.receipt_digest, signer) }
      const inserted = yield* sql<{ receipt_id: string }>`
        WITH inserted AS (
          INSERT INTO reliance_receipts ${sql.insert({
            receipt_id: receipt.receipt_id, tenant_id: receipt.tenant_id, principal: receipt.principal,
            subject_public_id: receipt.subject_public_id, purpose_id: receipt.purpose_id, requested_action: receipt.requested_action,
            determination_digest: receipt.determination_digest, determination_id: receipt.determination_id, decision: receipt.decision,
            receipt_digest: receipt.receipt_digest, receipt: JSON.stringify(receipt), created_at: new Date(now)
          })}
          ON CONFLICT (tenant_id, principal, subject_public_id, purpose_id, requested_action, determination_digest) DO NOTHING
          RETURNING receipt_id
        ), enqueued AS (
          INSERT INTO log_pending (kind, ref, entry) SELECT 'receipt', receipt_id, ${entryBytesOf(receiptEntryOf(receipt))} FROM inserted
        )
        SELECT receipt_id FROM inserted`.pipe(Effect.orDie)
      // The baselines answer new receipts only (every bench request has a principal of its own).
      return inserted.length === 0 ? Result.fail("conflict" as const) : Result.succeed(receipt)
    })
})
