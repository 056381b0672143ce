import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { trustStateDigestOf } from "../../src/domain/MachineTrust.js"
import { digestOf } from "../../src/domain/Canonical.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

let server: TestServer
let readKey: string
const id = "DET-V1-TRUST-0001"
let asOf: number

beforeAll(async () => {
  server = await startTestServer()
  asOf = Date.now() - DAY_MS
  readKey = (await createKey(server, ["trust:read"])).api_key
  const put = await putDetermination(server, id, determinationBody(asOf))
  expect(put.status).toBe(201)
})
afterAll(() => server?.close())

describe(`trust resolution (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("machine and human return the same canonical document with a verifiable digest", async () => {
    const machine = await request(server, "GET", `/api/v1/trust/${id}/machine`, { bearer: readKey })
    const human = await request(server, "GET", `/api/v1/trust/${id}/human`)
    expect(machine.status).toBe(200)
    expect(human.status).toBe(200)
    expect(human.body).toEqual(machine.body)
    const doc = machine.body
    expect(doc.schema).toBe("pv.machine-trust.v1")
    expect(Object.keys(doc).sort()).toEqual([
      "allowed_claims", "authority", "claims", "determination", "engine", "evidence", "freshness", "integrity",
      "lifecycle", "limitations", "policy", "prohibited_inferences", "purchase", "schema", "subject", "trust_state_digest"
    ])
    expect(doc.trust_state_digest).toBe(trustStateDigestOf(doc))
    expect(doc.authority).toEqual({
      issuance_authorized: false, authority_state: "NOT_AUTHORIZED", authoritative_state: "NOT_AUTHORIZED", signing_key_count: 0
    })
    expect(doc.determination.determination_id).toMatch(/^dv_[0-9A-HJKMNP-TV-Z]{26}$/)
    expect(doc.determination.determination_digest).toBe(digestOf(determinationBody(asOf)))
    expect(doc.integrity.evidence_digest).toBe(digestOf(determinationBody(asOf).evidence))
    expect(doc.freshness.state).toBe("CURRENT")
    expect(doc.lifecycle.state).toBe("NOT_ISSUED")
    expect(machine.headers.get("etag")).toBe(`"${doc.trust_state_digest}"`)
  })

  it("answers 304 to a matching If-None-Match", async () => {
    const first = await request(server, "GET", `/api/v1/trust/${id}/machine`, { bearer: readKey })
    const again = await request(server, "GET", `/api/v1/trust/${id}/machine`, {
      bearer: readKey, headers: { "if-none-match": first.headers.get("etag")! }
    })
    expect(again.status).toBe(304)
    expect(again.text).toBe("")
    const other = await request(server, "GET", `/api/v1/trust/${id}/machine`, {
      bearer: readKey, headers: { "if-none-match": `"${"0".repeat(64)}"` }
    })
    expect(other.status).toBe(200)
  })

  it("keeps the digest stable, and changes it after a PUT and after a freshness boundary", async () => {
    const a = await request(server, "GET", `/api/v1/trust/${id}/human`)
    const b = await request(server, "GET", `/api/v1/trust/${id}/human`)
    expect(b.body.trust_state_digest).toBe(a.body.trust_state_digest)

    const updated = await putDetermination(server, id, determinationBody(asOf, { tier: "T3" }))
    expect(updated.status).toBe(200)
    expect(updated.body.outcome).toBe("updated")
    expect(updated.body.changed_fields).toEqual(["tier"])
    const c = await request(server, "GET", `/api/v1/trust/${id}/human`)
    expect(c.body.trust_state_digest).not.toBe(b.body.trust_state_digest)
    expect(c.body.determination.tier).toBe("T3")

    const unchanged = await putDetermination(server, id, determinationBody(asOf, { tier: "T3" }))
    expect(unchanged.status).toBe(200)
    expect(unchanged.body.outcome).toBe("unchanged")
    expect(unchanged.body.determination_id).toBe(updated.body.determination_id)

    // valid_until = as_of + 100 d, so APPROACHING_STALE starts at as_of + 80 d.
    server.clock.setTo(asOf + 80 * DAY_MS)
    const d = await request(server, "GET", `/api/v1/trust/${id}/human`)
    expect(d.body.freshness.state).toBe("APPROACHING_STALE")
    expect(d.body.trust_state_digest).not.toBe(c.body.trust_state_digest)
    server.clock.setTo(Date.now())
  })
})
