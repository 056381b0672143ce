import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyReceipt, verifyReceiptDigest } from "../../src/client/index.js"
import { Schema } from "effect"
import { digestOf } from "../../src/domain/Canonical.js"
import { jsonTextEncoder } from "../../src/domain/Json.js"
import { CreatedRelianceReceipt, RelianceReceipt } from "../../src/domain/Receipt.js"
import { DAY_MS, determinationBody, relianceRequest } from "../support/fixtures.js"
import { createKey, putDetermination, request, expectProblem } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

let server: TestServer
let writer: string
let otherTenant: string
let readOnly: string
let trustReader: string
const subject = "DET-V1-RCPT-0001"
let asOf: number

const receiptFields = [
  "schema", "receipt_id", "created_at", "tenant_id", "organization", "principal", "subject_public_id", "purpose_id",
  "requested_action", "claim_scope", "determination_id", "determination_digest", "trust_state_digest", "policy_version",
  "policy_digest", "tier", "lifecycle_state", "freshness_state", "decision", "verdicts", "authority_state",
  "credential_state"
]
const prohibited = [
  "decision", "trust_state_digest", "policy_version", "policy_digest", "tier", "verdicts", "authority_state",
  "lifecycle_state", "determination_id"
]

const body = (principal: string, overrides: Record<string, unknown> = {}): Record<string, unknown> =>
  relianceRequest(subject, principal, overrides)

const create = (bearer: string, payload: unknown) => request(server, "POST", "/api/v1/reliance-receipts", { bearer, body: payload })
const read = (bearer: string, receiptId: string) => request(server, "GET", `/api/v1/reliance-receipts/${receiptId}`, { bearer })
const encodeCreated = jsonTextEncoder(CreatedRelianceReceipt)
const decodeCreated = Schema.decodeUnknownSync(CreatedRelianceReceipt)
const encodeReceipt = jsonTextEncoder(RelianceReceipt)
const decodeReceipt = Schema.decodeUnknownSync(RelianceReceipt)
const withoutIdempotent = ({ idempotent: _, ...rest }: Record<string, unknown>) => rest


beforeAll(async () => {
  server = await startTestServer()
  asOf = Date.now() - DAY_MS
  writer = (await createKey(server, ["receipt:write", "receipt:read"])).api_key
  readOnly = (await createKey(server, ["receipt:read"])).api_key
  trustReader = (await createKey(server, ["trust:read"])).api_key
  otherTenant = (await createKey(server, ["receipt:write", "receipt:read"], { tenant_id: "tenant-b" })).api_key
  expect((await putDetermination(server, subject, determinationBody(asOf, { tier: "T3" }))).status).toBe(201)
})
afterAll(() => server?.close())

describe(`reliance receipts (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("creates a receipt whose every decision field the server derived (201)", async () => {
    const reply = await create(writer, body("agent:create"))
    expect(reply.status, reply.text).toBe(201)
    const receipt = reply.body
    expect(Object.keys(receipt).sort()).toEqual([...receiptFields, "snapshot_payload", "receipt_digest", "signature", "idempotent"].sort())
    expect(Object.keys(receipt.snapshot_payload).sort()).toEqual([...receiptFields].sort())
    expect(receipt.schema).toBe("pv-reliance-receipt-v1")
    expect(receipt.receipt_id).toMatch(/^rr_[0-9A-HJKMNP-TV-Z]{26}$/)
    expect(receipt.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(receipt.idempotent).toBe(false)
    expect(receipt.authority_state).toBe("ISSUANCE_NOT_AUTHORIZED")
    expect(receipt.credential_state).toBe("NOT_ISSUED")
    expect(verifyReceiptDigest(receipt)).toBe(true)
    expect(verifyReceipt(receipt)).toBe(true)
    expect(receipt.receipt_digest).toBe(digestOf(receipt.snapshot_payload))

    const trust = (await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: trustReader })).body
    const policy = (await request(server, "GET", "/api/v1/policy", { bearer: writer })).body
    expect(receipt).toMatchObject({
      ...body("agent:create"),
      determination_id: trust.determination.determination_id,
      determination_digest: trust.determination.determination_digest,
      trust_state_digest: trust.trust_state_digest,
      policy_version: policy.policy_version,
      policy_digest: policy.policy_digest,
      tier: "T3",
      lifecycle_state: "NOT_ISSUED",
      freshness_state: "CURRENT",
      decision: "ACTIONABLE"
    })
    expect(receipt.verdicts.map((v: any) => [v.check, v.outcome])).toEqual([
      ["freshness", "PASS"], ["lifecycle", "PASS"], ["authority", "PASS"], ["tier", "PASS"], ["eligibility", "PASS"],
      ["claim_scope", "PASS"]
    ])
  })

  it("records a NOT_ACTIONABLE evaluation as a receipt too", async () => {
    const credential = await create(writer, body("agent:refused", { requested_action: "contract" }))
    expect(credential.status).toBe(201)
    expect(credential.body.decision).toBe("NOT_ACTIONABLE")
    const failed = credential.body.verdicts.filter((v: any) => v.outcome === "FAIL").map((v: any) => v.check)
    expect(failed).toContain("authority")

    const inference = await create(writer, body("agent:refused", { claim_scope: ["identity", "credential_issued"] }))
    expect(inference.status).toBe(201)
    expect(inference.body.decision).toBe("NOT_ACTIONABLE")
    expect(inference.body.verdicts.filter((v: any) => v.outcome === "FAIL").map((v: any) => v.check)).toEqual(["claim_scope"])
    expect(verifyReceipt(inference.body)).toBe(true)
  })

  it("returns the stored receipt for the same idempotency key (200) and refuses a changed intent (409)", async () => {
    const first = await create(writer, body("agent:idem"))
    expect(first.status).toBe(201)
    const again = await create(writer, body("agent:idem"))
    expect(again.status).toBe(200)
    expect(again.body.idempotent).toBe(true)
    expect(withoutIdempotent(again.body)).toEqual(withoutIdempotent(first.body))

    for (const change of [{ organization: "Another Org" }, { claim_scope: ["identity", "assurance"] }, { claim_scope: ["assurance"] }]) {
      const conflict = await create(writer, body("agent:idem", change))
      expectProblem(conflict, 409, "idempotency-conflict")
    }
    // Any other part of the key makes a new receipt.
    for (const change of [{ principal: "agent:idem-2" }, { requested_action: "screen" }, { purpose_id: "access-decision", requested_action: "grant-read" }]) {
      const fresh = await create(writer, body("agent:idem", change))
      expect(fresh.status, JSON.stringify(change)).toBe(201)
      expect(fresh.body.receipt_id).not.toBe(first.body.receipt_id)
    }
    // tenant_id is part of the key: another tenant with the same tuple gets its own receipt.
    const other = await create(otherTenant, body("agent:idem", { tenant_id: "tenant-b" }))
    expect(other.status).toBe(201)
    expect(other.body.receipt_id).not.toBe(first.body.receipt_id)
  })

  it("answers a body sent again by the same key as the first time: refusals again, and change nothing; a good one is a replay", async () => {
    // The guard remembers a key's checked bodies (http/RequestGuard.ts): only what passed, and only per key.
    const good = JSON.stringify(body("agent:again"))
    const send = (bearer: string, rawBody: string) =>
      request(server, "POST", "/api/v1/reliance-receipts", { bearer, rawBody, headers: { "content-type": "application/json" } })
    const refused: Array<[string, number, string]> = [
      [good.replace(`"organization":`, `"organization":"Evil","organization":`), 400, "malformed-json"],
      [good.replace(`"agent:again"`, `"agent:again\\u0000"`), 422, "validation-failed"],
      [good.replace(`"agent:again"`, `"agent:\\ud800again"`), 422, "validation-failed"],
      [JSON.stringify({ ...body("agent:again"), tier: "T4" }), 422, "prohibited-field"],
      [JSON.stringify({ ...body("agent:again"), extra: 1 }), 422, "validation-failed"],
      [good.slice(0, -1), 400, "malformed-json"]
    ]
    for (const [text, status, code] of refused) {
      const first = await send(writer, text)
      const again = await send(writer, text)
      expectProblem(first, status, code)
      expectProblem(again, status, code)
      const { instance: _a, ...firstProblem } = first.body
      const { instance: _b, ...againProblem } = again.body
      expect(againProblem).toEqual(firstProblem)
    }
    // None of them stored anything: the good body is new, then a replay of the very same receipt.
    const created = await send(writer, good)
    expect(created.status, created.text).toBe(201)
    const replayed = await send(writer, good)
    expect(replayed.status).toBe(200)
    expect(withoutIdempotent(replayed.body)).toEqual(withoutIdempotent(created.body))
    // The same text from another tenant's key is that key's own request: refused for its tenant_id, not answered from memory.
    expectProblem(await send(otherTenant, good), 403, "forbidden")
  })

  it("refuses every server-derived field with 422 prohibited-field and one pointer per field", async () => {
    for (const field of prohibited) {
      const reply = await create(writer, body("agent:prohibited", { [field]: field === "verdicts" ? [] : "ACTIONABLE" }))
      expectProblem(reply, 422, "prohibited-field")
      expect(reply.body.errors.map((e: any) => e.pointer)).toEqual([`/${field}`])
    }
    const all = await create(writer, body("agent:prohibited", Object.fromEntries(prohibited.map((f) => [f, "x"]))))
    expectProblem(all, 422, "prohibited-field")
    expect(all.body.errors.map((e: any) => e.pointer).sort()).toEqual(prohibited.map((f) => `/${f}`).sort())
    // Checked on the raw body, before validation: missing and unknown fields do not hide it.
    const { principal: _, ...missing } = body("agent:prohibited", { decision: "ACTIONABLE", surprise: 1 })
    const mixed = await create(writer, missing)
    expectProblem(mixed, 422, "prohibited-field")
    expect(mixed.body.errors.map((e: any) => e.pointer)).toEqual(["/decision"])
    // Nothing was stored by any of these.
    expect((await create(writer, body("agent:prohibited"))).status).toBe(201)
  })

  it("refuses unknown, missing and ill-typed fields with 422 validation-failed and their pointers", async () => {
    const cases: ReadonlyArray<readonly [unknown, ReadonlyArray<string>]> = [
      [body("agent:invalid", { surprise: true }), ["/surprise"]],
      [body("agent:invalid", { receipt_digest: "0".repeat(64) }), ["/receipt_digest"]],
      [body("agent:invalid", { claim_scope: "identity" }), ["/claim_scope"]],
      [body("agent:invalid", { claim_scope: [] }), ["/claim_scope"]],
      [body("agent:invalid", { claim_scope: Array.from({ length: 33 }, (_, i) => `claim-${i}`) }), ["/claim_scope"]],
      [body("agent:invalid", { claim_scope: ["identity", 7] }), ["/claim_scope/1"]],
      [body("agent:invalid", { organization: 5, principal: null }), ["/organization", "/principal"]],
      [body("agent:invalid", { subject_public_id: "det-v1-not-valid" }), ["/subject_public_id"]],
      [body("agent:invalid", { subject_public_id: "DET-V1-" }), ["/subject_public_id"]],
      [body("agent:invalid", { tenant_id: "" }), ["/tenant_id"]]
    ]
    for (const [payload, pointers] of cases) {
      const reply = await create(writer, payload)
      expectProblem(reply, 422, "validation-failed")
      expect(reply.body.errors.map((e: any) => e.pointer).sort(), JSON.stringify(payload)).toEqual([...pointers].sort())
    }
    for (const field of Object.keys(body("x"))) {
      const payload = body("agent:invalid")
      delete payload[field]
      const reply = await create(writer, payload)
      expectProblem(reply, 422, "validation-failed")
      expect(reply.body.errors.map((e: any) => e.pointer)).toEqual([`/${field}`])
    }
    for (const payload of [[], "text", 42, null]) {
      expectProblem(await create(writer, payload), 422, "validation-failed")
    }
  })

  it("answers 422 unknown-purpose for a purpose or action the policy does not name", async () => {
    for (const change of [
      { purpose_id: "world-domination" },
      { requested_action: "grant-read" },
      { purpose_id: "constructor" },
      { requested_action: "toString" }
    ]) {
      expectProblem(await create(writer, body("agent:purpose", change)), 422, "unknown-purpose")
    }
  })

  it("answers 404 determination-not-found for a well-formed unknown subject", async () => {
    expectProblem(await create(writer, body("agent:unknown", { subject_public_id: "DET-V1-NO-SUCH-0404" })), 404, "determination-not-found")
  })

  it("keeps tenants apart: 403 for another tenant's tenant_id, 404 for another tenant's receipt", async () => {
    expectProblem(await create(writer, body("agent:tenant", { tenant_id: "tenant-b" })), 403, "forbidden")
    expectProblem(await create(otherTenant, body("agent:tenant")), 403, "forbidden")

    const mine = await create(writer, body("agent:tenant"))
    expect(mine.status).toBe(201)
    const own = await read(readOnly, mine.body.receipt_id)
    expect(own.status).toBe(200)
    expectProblem(await read(otherTenant, mine.body.receipt_id), 404, "receipt-not-found")
    expectProblem(await read(writer, "rr_01ARZ3NDEKTSV4RRFFQ69G5FAV"), 404, "receipt-not-found")
    expectProblem(await read(writer, "not-a-receipt-id"), 404, "receipt-not-found")
  })

  it("needs the right key and scope", async () => {
    expectProblem(await request(server, "POST", "/api/v1/reliance-receipts", { body: body("agent:scope") }), 401, "unauthorized")
    expectProblem(await create(readOnly, body("agent:scope")), 403, "insufficient-scope")
    expectProblem(await create(trustReader, body("agent:scope", { decision: "ACTIONABLE" })), 403, "insufficient-scope")
    const stored = await create(writer, body("agent:scope"))
    expect(stored.status).toBe(201)
    const denied = await read(trustReader, stored.body.receipt_id)
    expectProblem(denied, 403, "insufficient-scope")
    expect(denied.headers.get("www-authenticate")).toContain(`scope="receipt:read"`)
    expectProblem(await request(server, "GET", `/api/v1/reliance-receipts/${stored.body.receipt_id}`), 401, "unauthorized")
  })

  it("reads a stored receipt back as stored, without idempotent", async () => {
    const created = await create(writer, body("agent:read"))
    const reply = await read(readOnly, created.body.receipt_id)
    expect(reply.status).toBe(200)
    expect("idempotent" in reply.body).toBe(false)
    expect(reply.body).toEqual(withoutIdempotent(created.body))
    expect(verifyReceipt(reply.body)).toBe(true)
  })

  it("answers a receipt's creation, replays and reads with the same bytes, as its success schemas encode it", async () => {
    const created = await create(writer, body("agent:bytes"))
    expect(created.status).toBe(201)
    // The 201's text is what CreatedRelianceReceipt's encoder writes for the receipt it holds.
    expect(created.text).toBe(encodeCreated(decodeCreated(JSON.parse(created.text))))
    expect(created.text.endsWith(',"idempotent":false}')).toBe(true)
    const stored = created.text.slice(0, -',"idempotent":false}'.length) + "}"
    for (let i = 0; i < 2; i++) {
      const replay = await create(writer, body("agent:bytes"))
      expect(replay.status).toBe(200)
      expect(replay.text).toBe(stored.slice(0, -1) + ',"idempotent":true}')
    }
    const reply = await read(readOnly, created.body.receipt_id)
    expect(reply.text).toBe(stored)
    expect(reply.text).toBe(encodeReceipt(decodeReceipt(JSON.parse(reply.text))))
  })

  it("stores exactly one receipt for 50 concurrent identical requests: one 201, the rest 200", async () => {
    const replies = await Promise.all(Array.from({ length: 50 }, () => create(writer, body("agent:burst"))))
    const statuses = replies.map((r) => r.status)
    expect(statuses.filter((s) => s === 201)).toHaveLength(1)
    expect(statuses.filter((s) => s === 200)).toHaveLength(49)
    const ids = new Set(replies.map((r) => r.body.receipt_id))
    expect(ids.size).toBe(1)
    expect(new Set(replies.map((r) => r.body.receipt_digest)).size).toBe(1)
    expect(replies.filter((r) => r.body.idempotent === true)).toHaveLength(49)
    const stored = await read(writer, [...ids][0]!)
    expect(stored.body).toEqual(withoutIdempotent(replies.find((r) => r.status === 201)!.body))
  })

  it("keeps a receipt across a freshness change of the same determination, unchanged", async () => {
    const first = await create(writer, body("agent:fresh"))
    expect(first.body.freshness_state).toBe("CURRENT")
    try {
      // valid_until = as_of + 100 d: STALE from as_of + 100 d.
      server.clock.setTo(asOf + 120 * DAY_MS)
      const trust = await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: trustReader })
      expect(trust.body.freshness.state).toBe("STALE")
      const again = await create(writer, body("agent:fresh"))
      expect(again.status).toBe(200)
      expect(withoutIdempotent(again.body)).toEqual(withoutIdempotent(first.body))
      // A new intent on the stale record is evaluated now, and not actionable.
      const fresh = await create(writer, body("agent:fresh-2"))
      expect(fresh.status).toBe(201)
      expect(fresh.body.freshness_state).toBe("STALE")
      expect(fresh.body.decision).toBe("NOT_ACTIONABLE")
    } finally {
      server.clock.setTo(Date.now())
    }
  })

  it("makes a new receipt after the determination changes, and never changes the stored one", async () => {
    const before = await create(writer, body("agent:change"))
    expect(before.status).toBe(201)
    const updated = await putDetermination(server, subject, determinationBody(asOf, { tier: "T4", allowed_claims: ["assurance"] }))
    expect(updated.status).toBe(200)
    expect(updated.body.outcome).toBe("updated")

    const after = await create(writer, body("agent:change"))
    expect(after.status).toBe(201)
    expect(after.body.idempotent).toBe(false)
    expect(after.body.receipt_id).not.toBe(before.body.receipt_id)
    expect(after.body.determination_id).toBe(updated.body.determination_id)
    expect(after.body.determination_digest).toBe(updated.body.determination_digest)
    expect(after.body.determination_digest).not.toBe(before.body.determination_digest)
    expect(after.body.trust_state_digest).not.toBe(before.body.trust_state_digest)
    expect(after.body.tier).toBe("T4")
    // "identity" is no longer an allowed claim.
    expect(after.body.decision).toBe("NOT_ACTIONABLE")
    expect((await create(writer, body("agent:change"))).status).toBe(200)

    const stored = await read(writer, before.body.receipt_id)
    expect(stored.status).toBe(200)
    expect(stored.body).toEqual(withoutIdempotent(before.body))
    expect(stored.body.snapshot_payload.tier).toBe("T3")
    expect(stored.body.receipt_digest).toBe(before.body.receipt_digest)
    expect(verifyReceipt(stored.body)).toBe(true)
  })

  it("documents the 7-field body in OpenAPI", async () => {
    const spec = (await request(server, "GET", "/openapi.json")).body
    const resolve = (schema: any): any =>
      schema?.$ref ? resolve(spec.components.schemas[schema.$ref.split("/").pop()]) : schema
    for (const path of ["/api/v1/reliance-receipts", "/api/v1/actionability"]) {
      const schema = resolve(spec.paths[path].post.requestBody.content["application/json"].schema)
      expect(Object.keys(schema.properties).sort()).toEqual(
        ["claim_scope", "organization", "principal", "purpose_id", "requested_action", "subject_public_id", "tenant_id"]
      )
      expect([...schema.required].sort()).toEqual(Object.keys(schema.properties).sort())
      expect(schema.additionalProperties).toBe(false)
    }
    expect(Object.keys(spec.paths["/api/v1/reliance-receipts"].post.responses)).toEqual(expect.arrayContaining(["200", "201", "409", "422"]))
    expect(spec.paths["/api/v1/reliance-receipts/{receiptId}"].get).toBeDefined()
    expect(spec.paths["/api/v1/policy"].get).toBeDefined()
  })
})
