import { readFileSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { digestOf } from "../../src/domain/Canonical.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request, expectProblem } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

let server: TestServer
let evaluator: string
let writer: string
let trustReader: string
const subject = "QUAL-V1-ACTION-0001"
let asOf: number

const shippedPolicy = JSON.parse(readFileSync(new URL("../../policy/policy.v1.json", import.meta.url), "utf8"))

const body = (principal: string, overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  tenant_id: "tenant-a",
  organization: "Acme Procurement",
  principal,
  subject_public_id: subject,
  purpose_id: "access-decision",
  requested_action: "grant-read",
  claim_scope: ["identity", "assurance"],
  ...overrides
})

const evaluate = (bearer: string, payload: unknown) => request(server, "POST", "/api/v1/actionability", { bearer, body: payload })


beforeAll(async () => {
  server = await startTestServer()
  asOf = Date.now() - DAY_MS
  evaluator = (await createKey(server, ["actionability:read"])).api_key
  writer = (await createKey(server, ["receipt:write"])).api_key
  trustReader = (await createKey(server, ["trust:read"])).api_key
  expect((await putDetermination(server, subject, determinationBody(asOf))).status).toBe(201)
})
afterAll(() => server?.close())

describe(`actionability (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("evaluates the request against the current trust document and policy", async () => {
    const reply = await evaluate(evaluator, body("agent:eval"))
    expect(reply.status, reply.text).toBe(200)
    const trust = (await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: trustReader })).body
    expect(reply.body).toEqual({
      ...body("agent:eval"),
      determination_id: trust.determination.determination_id,
      determination_digest: trust.determination.determination_digest,
      trust_state_digest: trust.trust_state_digest,
      policy_version: trust.policy.policy_version,
      policy_digest: trust.policy.policy_digest,
      tier: "T2",
      lifecycle_state: "NOT_ISSUED",
      freshness_state: "CURRENT",
      decision: "ACTIONABLE",
      verdicts: expect.any(Array),
      authority_state: "ISSUANCE_NOT_AUTHORIZED",
      credential_state: "NOT_ISSUED"
    })
    expect(reply.body.verdicts.map((v: any) => v.check)).toEqual(["freshness", "lifecycle", "authority", "tier", "eligibility", "claim_scope"])
    expect(reply.body.verdicts.every((v: any) => v.outcome === "PASS" && typeof v.reason === "string")).toBe(true)
  })

  it("fails the checks the record or the policy does not meet", async () => {
    // grant-write needs T3 (the record is T2); grant-admin also needs an issued credential and ACTIVE.
    const write = await evaluate(evaluator, body("agent:eval", { requested_action: "grant-write" }))
    expect(write.body.decision).toBe("NOT_ACTIONABLE")
    expect(write.body.verdicts.filter((v: any) => v.outcome === "FAIL").map((v: any) => v.check)).toEqual(["tier"])
    const admin = await evaluate(evaluator, body("agent:eval", { requested_action: "grant-admin" }))
    expect(admin.body.verdicts.filter((v: any) => v.outcome === "FAIL").map((v: any) => v.check)).toEqual(["lifecycle", "authority", "tier"])
    const scope = await evaluate(evaluator, body("agent:eval", { claim_scope: ["identity", "location"] }))
    expect(scope.body.verdicts.filter((v: any) => v.outcome === "FAIL").map((v: any) => v.check)).toEqual(["claim_scope"])
    try {
      server.clock.setTo(asOf + 120 * DAY_MS)
      const stale = await evaluate(evaluator, body("agent:eval"))
      expect(stale.body.freshness_state).toBe("STALE")
      expect(stale.body.decision).toBe("NOT_ACTIONABLE")
      expect(stale.body.verdicts.filter((v: any) => v.outcome === "FAIL").map((v: any) => v.check)).toEqual(["freshness"])
    } finally {
      server.clock.setTo(Date.now())
    }
  })

  it("persists nothing: a receipt for the same request afterwards is new (201) and agrees with it", async () => {
    const evaluation = await evaluate(evaluator, body("agent:no-store"))
    expect(evaluation.status).toBe(200)
    const receipt = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: writer, body: body("agent:no-store") })
    expect(receipt.status).toBe(201)
    expect(receipt.body.decision).toBe(evaluation.body.decision)
    expect(receipt.body.verdicts).toEqual(evaluation.body.verdicts)
    expect(receipt.body.trust_state_digest).toBe(evaluation.body.trust_state_digest)
  })

  it("validates the body like a receipt", async () => {
    const prohibited = await evaluate(evaluator, body("agent:bad", { decision: "ACTIONABLE", tier: "T4" }))
    expectProblem(prohibited, 422, "prohibited-field")
    expect(prohibited.body.errors.map((e: any) => e.pointer)).toEqual(["/decision", "/tier"])
    const invalid = await evaluate(evaluator, body("agent:bad", { subject_public_id: "nope", extra: 1 }))
    expectProblem(invalid, 422, "validation-failed")
    expect(invalid.body.errors.map((e: any) => e.pointer).sort()).toEqual(["/extra", "/subject_public_id"])
    expectProblem(await evaluate(evaluator, body("agent:bad", { purpose_id: "unknown" })), 422, "unknown-purpose")
    expectProblem(await evaluate(evaluator, body("agent:bad", { tenant_id: "tenant-z" })), 403, "forbidden")
    expectProblem(await evaluate(evaluator, body("agent:bad", { subject_public_id: "DET-V1-ABSENT-1" })), 404, "determination-not-found")
  })

  it("needs actionability:read", async () => {
    expectProblem(await evaluate(writer, body("agent:scope")), 403, "insufficient-scope")
    expectProblem(await request(server, "POST", "/api/v1/actionability", { body: body("agent:scope") }), 401, "unauthorized")
  })
})

describe(`policy (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("serves the shipped policy with a digest a client can recompute, to any key", async () => {
    for (const bearer of [evaluator, writer, trustReader]) {
      const reply = await request(server, "GET", "/api/v1/policy", { bearer })
      expect(reply.status).toBe(200)
      const { policy_digest, ...document } = reply.body
      expect(document).toEqual(shippedPolicy)
      expect(policy_digest).toBe(digestOf(shippedPolicy))
      expect(reply.body.policy_version).toBe(shippedPolicy.policy_version)
    }
    const trust = (await request(server, "GET", `/api/v1/trust/${subject}/human`)).body
    expect(trust.policy).toEqual({
      policy_id: shippedPolicy.policy_id,
      policy_version: shippedPolicy.policy_version,
      policy_digest: digestOf(shippedPolicy)
    })
  })

  it("needs an API key", async () => {
    expectProblem(await request(server, "GET", "/api/v1/policy"), 401, "unauthorized")
    expectProblem(await request(server, "GET", "/api/v1/policy", { bearer: server.operatorToken }), 401, "unauthorized")
  })
})
