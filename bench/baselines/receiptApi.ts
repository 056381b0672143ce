// Baseline (r'): what a careful Effect engineer writes for POST /reliance-receipts, new receipts only. (b')'s
// HttpApi and `HttpApiSecurity.bearer` middleware (the key's SHA-256 looked up in a Map), a POST endpoint whose
// payload is decoded by HttpApi through the service's own request schema (RelianceRequest) and whose answer is
// encoded by HttpApi through the service's NewRelianceReceipt (status 201). The handler does a new receipt's pure
// work with the service's own domain functions and ids (the trust document looked up by the request's subject in
// a Map: BENCH_DOCUMENT_FILE's under BENCH_PUBLIC_ID, a 404 for any other; the evaluation against it and
// policy/policy.v1.json, `sealReceipt`'s RFC 8785 digest, the Ed25519 signature of the digest, the log entry's
// bytes) and writes it durably in one autocommitted statement per request through @effect/sql-pg with the
// service's pool size (16): the receipt row (`ON CONFLICT … DO NOTHING` on the idempotency key) and its pending
// log entry, in tables laid out as the service's migrations lay them out. What it leaves out of the service's work: rate limits, request ids, access log,
// metrics, CORS, the body checks of the front door, replays, the log's integration, the group commit.
// DATABASE_URL: a database of its own (it creates its two tables); BENCH_KEY: the accepted key.
import { generateKeyPairSync } from "node:crypto"
import { readFileSync } from "node:fs"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Result, Schema } from "effect"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiError, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { MachineTrustResponse } from "../../src/domain/MachineTrust.js"
import { loadPolicy, PolicyDocument } from "../../src/domain/PolicyDocument.js"
import { NewRelianceReceipt, ReceiptSchemaId, RelianceRequest, sealReceipt } from "../../src/domain/Receipt.js"
import { signerFromPrivateKey } from "../../src/events/Signer.js"
import { entryBytesOf, receiptEntryOf, signReceiptDigest } from "../../src/log/Entries.js"
import { Ids } from "../../src/platform/Ids.js"
import { evaluateActionability } from "../../src/receipts/Actionability.js"
import { Bearer, BearerLive, Caller, serveBaseline } from "./bearer.js"

const trustBySubject = new Map([
  [process.env.BENCH_PUBLIC_ID!, Schema.decodeUnknownSync(MachineTrustResponse)(JSON.parse(readFileSync(process.env.BENCH_DOCUMENT_FILE!, "utf8")))]
])
const policy = loadPolicy(Schema.decodeUnknownSync(PolicyDocument)(JSON.parse(readFileSync("policy/policy.v1.json", "utf8"))))
const signer = signerFromPrivateKey(generateKeyPairSync("ed25519").privateKey, "ephemeral")
class BaselineApi extends HttpApi.make("baseline").add(
  HttpApiGroup.make("receipts").add(
    HttpApiEndpoint.post("create", "/api/v1/reliance-receipts", {
      payload: RelianceRequest,
      success: NewRelianceReceipt.pipe(HttpApiSchema.status(201)),
      error: [HttpApiError.Forbidden, HttpApiError.NotFound, HttpApiError.Conflict]
    })
  ).middleware(Bearer)
) {}

const ReceiptsLive = HttpApiBuilder.group(BaselineApi, "receipts", Effect.fnUntraced(function*(handlers) {
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
  return handlers.handle("create", ({ payload }) =>
    Effect.gen(function*() {
      const caller = yield* Caller
      if (payload.tenant_id !== caller.tenant_id) return yield* new HttpApiError.Forbidden({})
      const trust = trustBySubject.get(payload.subject_public_id)
      if (trust === undefined) return yield* new HttpApiError.NotFound({})
      const evaluation = evaluateActionability(trust, policy, payload)
      if (Result.isFailure(evaluation)) return yield* new HttpApiError.Forbidden({})
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
      // The baseline answers new receipts only (every bench request has a principal of its own).
      if (inserted.length === 0) return yield* new HttpApiError.Conflict({})
      return { ...receipt, idempotent: false as const }
    }))
}))

serveBaseline(HttpApiBuilder.layer(BaselineApi).pipe(
  Layer.provide(ReceiptsLive),
  Layer.provide(BearerLive),
  Layer.provide(PgClient.layer({ url: Redacted.make(process.env.DATABASE_URL!), maxConnections: 16 })),
  Layer.provide(Ids.layer)
))
