// `node --import tsx bench/receiptSteps.ts`: CPU µs of each pure step of POST /reliance-receipts, in one process,
// on the bench's own request body: the body checks of the front door (http/RequestGuard.ts), the payload and request
// decoding, the evaluation, and a new receipt's digest, signature and serialisations. What the service adds around
// them (HTTP, the Effect pipeline, the database) is what `npm run bench:cpu` measures minus these.
import { generateKeyPairSync } from "node:crypto"
import { Schema } from "effect"
import canonicalize from "canonicalize"
import { digestOf } from "../src/domain/Canonical.js"
import { exceedsDepth, findDuplicateMember, findUnstorable, jsonTextEncoder, MaxJsonDepth } from "../src/domain/Json.js"
import type { MachineTrustResponse } from "../src/domain/MachineTrust.js"
import { loadPolicy, PolicyDocument } from "../src/domain/PolicyDocument.js"
import {
  CreatedRelianceReceipt,
  decodeRelianceRequest,
  ReceiptSchemaId,
  RelianceRequest,
  RelianceRequestBody,
  sealReceipt
} from "../src/domain/Receipt.js"
import { signerFromPrivateKey } from "../src/events/Signer.js"
import { entryBytesOf, receiptEntryOf, signReceiptDigest } from "../src/log/Entries.js"
import { evaluateActionability } from "../src/receipts/Actionability.js"
import { readFileSync } from "node:fs"

const body = JSON.stringify({
  tenant_id: "bench", organization: "Bench Org", principal: "replay", subject_public_id: "DET-V1-BENCH-CPU-0001",
  purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"]
})
const policy = loadPolicy(Schema.decodeUnknownSync(PolicyDocument)(JSON.parse(readFileSync("policy/policy.v1.json", "utf8"))))
const trust = {
  trust_state_digest: "c".repeat(64),
  determination: { determination_id: "dv_01JBENCH0000000000000000", determination_digest: "d".repeat(64), tier: "T2", eligible: true },
  freshness: { state: "CURRENT" },
  lifecycle: { state: "NOT_ISSUED" },
  authority: { issuance_authorized: false },
  allowed_claims: ["identity", "assurance"],
  prohibited_inferences: ["credential_issued"]
} as unknown as MachineTrustResponse
const signer = signerFromPrivateKey(generateKeyPairSync("ed25519").privateKey, "config")
const decodePayload = Schema.decodeUnknownResult(Schema.Union([RelianceRequestBody]))
const encodeCreated = jsonTextEncoder(CreatedRelianceReceipt)
const isRequest = Schema.is(RelianceRequest)

const request = JSON.parse(body) as typeof RelianceRequest.Type
const evaluation = (() => {
  const result = evaluateActionability(trust, policy, request)
  if (result._tag !== "Success") throw new Error("evaluation failed")
  return result.success
})()
const snapshot = { schema: ReceiptSchemaId, receipt_id: "rr_01JBENCH00000000000000000", created_at: new Date().toISOString(), ...evaluation }
const sealed = sealReceipt(snapshot)
const receipt = { ...sealed, signature: signReceiptDigest(sealed.receipt_digest, signer) }

let sink: unknown
const steps: Array<[string, () => unknown]> = [
  ["JSON.parse(body)", () => JSON.parse(body)],
  ["findDuplicateMember(body)", () => findDuplicateMember(body)],
  ["exceedsDepth(parsed)", () => exceedsDepth(request, MaxJsonDepth)],
  ["findUnstorable(parsed)", () => findUnstorable(request)],
  ["HttpApi payload schema (Union([Json]))", () => decodePayload(request)],
  ["decodeRelianceRequest", () => decodeRelianceRequest(request)],
  ["Schema.is(RelianceRequest)", () => isRequest(request)],
  ["evaluateActionability", () => evaluateActionability(trust, policy, request)],
  ["idempotency key (JSON of 6)", () => JSON.stringify([request.tenant_id, request.principal, request.subject_public_id, request.purpose_id, request.requested_action, "d".repeat(64)])],
  ["canonicalize(snapshot) (package)", () => canonicalize(snapshot)],
  ["receipt digest (JCS + SHA-256)", () => digestOf(snapshot)],
  ["sealReceipt (copies + digest)", () => sealReceipt(snapshot)],
  ["Ed25519 signature", () => signReceiptDigest(sealed.receipt_digest, signer)],
  ["JSON.stringify(receipt)", () => JSON.stringify(receipt)],
  ["CreatedRelianceReceipt encoder", () => encodeCreated({ ...receipt, idempotent: false })],
  ["log entry bytes (JCS)", () => entryBytesOf(receiptEntryOf(receipt))]
]
const rounds = Number(process.argv[2] ?? "3")
for (let round = 0; round < rounds; round++) {
  const lines: Array<string> = []
  for (const [name, step] of steps) {
    const n = name.startsWith("Ed25519") ? 5_000 : 20_000
    for (let i = 0; i < 2_000; i++) sink = step()
    const before = process.cpuUsage()
    for (let i = 0; i < n; i++) sink = step()
    const used = process.cpuUsage(before)
    lines.push(`${((used.user + used.system) / n).toFixed(2).padStart(8)} µs  ${name}`)
  }
  console.log(`round ${round + 1}\n${lines.join("\n")}`)
}
void sink
