import { request as httpRequest } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { asOperator, createKey, expectProblem, putDetermination, type Reply, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * docs/API.md §5.1: every non-2xx answer is problem+json with exactly type, title, status, detail,
 * code and optionally instance and errors, and leaks nothing internal.
 */

/**
 * PUT a body with Transfer-Encoding: chunked (no Content-Length), one chunk every few milliseconds, and
 * collect whatever answer arrives, even one sent before the upload is complete.
 */
const sendChunked = (path: string, chunks: ReadonlyArray<string>) =>
  new Promise<{ status: number; headers: Headers; text: string }>((resolve, reject) => {
    const url = new URL(server.baseUrl + path)
    const req = httpRequest({
      host: url.hostname, port: url.port, path: url.pathname, method: "PUT",
      headers: { authorization: `Bearer ${server.operatorToken}`, "content-type": "application/json", "transfer-encoding": "chunked" }
    })
    let answered = false
    req.on("response", (res) => {
      answered = true
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (d: string) => (text += d))
      res.on("end", () => {
        const headers = new Headers()
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === "string") headers.set(k, v)
        resolve({ status: res.statusCode ?? 0, headers, text })
      })
    })
    req.on("error", (error) => { if (!answered) reject(error) })
    const write = (i: number) => {
      if (answered || req.destroyed) return
      if (i === chunks.length) return void req.end()
      req.write(chunks[i])
      setTimeout(() => write(i + 1), 5)
    }
    write(0)
  })

const pointersOf = (reply: Reply): Array<string> => (reply.body?.errors ?? []).map((e: { pointer: string }) => e.pointer)

let server: TestServer
let readKey: string
const id = "DET-V1-ERRORS-0001"
let asOf: number
let baseline: any

const human = (publicId: string) => request(server, "GET", `/api/v1/trust/${publicId}/human`)

beforeAll(async () => {
  server = await startTestServer()
  asOf = Date.now() - DAY_MS
  readKey = (await createKey(server, ["trust:read"])).api_key
  expect((await putDetermination(server, id, determinationBody(asOf))).status).toBe(201)
  baseline = (await human(id)).body
  expect(baseline.schema).toBe("pv.machine-trust.v1")
})
afterAll(() => server?.close())

/** Bad input changes nothing: the trust document is exactly what it was before the rejected request. */
const expectUnchanged = async () => {
  const now = await human(id)
  expect(now.status).toBe(200)
  expect(now.body).toEqual(baseline)
}

describe(`error responses (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  describe("request bodies", () => {
    it("answers 400 malformed-json to unparseable JSON", async () => {
      for (const rawBody of ["{", "{\"tier\": }", "not json", "{\"a\":1}}", "", "\u0000"]) {
        const put = await request(server, "PUT", `/api/v1/determinations/${id}`, {
          ...asOperator(server), rawBody, headers: { "content-type": "application/json" }
        })
        expectProblem(put, 400, "malformed-json")
      }
      const post = await request(server, "POST", "/api/v1/api-keys", {
        ...asOperator(server), rawBody: "{\"tenant_id\":", headers: { "content-type": "application/json" }
      })
      expectProblem(post, 400, "malformed-json")
      await expectUnchanged()
    })

    it("answers 415 to a body that is not JSON by content type", async () => {
      const json = JSON.stringify(determinationBody(asOf, { tier: "T4" }))
      for (const contentType of ["text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "application/xml"]) {
        const put = await request(server, "PUT", `/api/v1/determinations/${id}`, {
          ...asOperator(server), rawBody: json, headers: { "content-type": contentType }
        })
        expectProblem(put, 415, "unsupported-media-type")
      }
      const noType = await fetch(`${server.baseUrl}/api/v1/determinations/${id}`, {
        method: "PUT", headers: { authorization: `Bearer ${server.operatorToken}` }, body: new Blob([json])
      })
      expect(noType.status).toBe(415)
      const post = await request(server, "POST", "/api/v1/api-keys", {
        ...asOperator(server),
        rawBody: JSON.stringify({ tenant_id: "t", name: "n", scopes: ["trust:read"] }),
        headers: { "content-type": "text/plain" }
      })
      expectProblem(post, 415, "unsupported-media-type")
      await expectUnchanged()
    })

    it("accepts JSON content types with parameters", async () => {
      const put = await request(server, "PUT", `/api/v1/determinations/${id}`, {
        ...asOperator(server),
        rawBody: JSON.stringify(determinationBody(asOf)),
        headers: { "content-type": "application/json; charset=utf-8" }
      })
      expect(put.status).toBe(200)
      expect(put.body.outcome).toBe("unchanged")
    })

    it("answers 413 to a body over 64 KiB and reads one of exactly 64 KiB", async () => {
      const envelope = (pad: string) => JSON.stringify({ tenant_id: "t-size", name: "n", scopes: ["trust:read"], pad })
      const exact = envelope("x".repeat(64 * 1024 - envelope("").length))
      expect(Buffer.byteLength(exact)).toBe(65_536)
      // Exactly 64 KiB is read and validated (the unknown field is refused), one byte more is refused unread.
      const atLimit = await request(server, "POST", "/api/v1/api-keys", { ...asOperator(server), rawBody: exact, headers: { "content-type": "application/json" } })
      expectProblem(atLimit, 422, "validation-failed")
      expect(pointersOf(atLimit)).toContain("/pad")
      const over = await request(server, "POST", "/api/v1/api-keys", {
        ...asOperator(server), rawBody: envelope("x".repeat(64 * 1024 - envelope("").length + 1)), headers: { "content-type": "application/json" }
      })
      expectProblem(over, 413, "payload-too-large")

      const big = await request(server, "PUT", `/api/v1/determinations/${id}`, {
        ...asOperator(server), body: determinationBody(asOf, { limitations: Array.from({ length: 200 }, () => "y".repeat(400)) })
      })
      expectProblem(big, 413, "payload-too-large")
      await expectUnchanged()
    })

    it("reads a JSON body sent in chunks without Content-Length", async () => {
      const json = JSON.stringify(determinationBody(asOf))
      const reply = await sendChunked(`/api/v1/determinations/${id}`, [json.slice(0, 100), json.slice(100)])
      expect(reply.status, reply.text).toBe(200)
      expect(JSON.parse(reply.text).outcome).toBe("unchanged")
    })

    // The bounded body read (src/http/RequestGuard.ts) stops reading at 64 KiB without destroying the socket,
    // so a chunked body that runs over still gets its 413 (and the connection closes after it).
    it("answers 413 to a body over 64 KiB sent in chunks without Content-Length", async () => {
      const reply = await sendChunked(`/api/v1/determinations/${id}`, Array.from({ length: 6 }, () => " ".repeat(16 * 1024)))
      expectProblem({ ...reply, body: JSON.parse(reply.text) }, 413, "payload-too-large")
      // Nobody reads the rest of that body: the connection must not be reused.
      expect(reply.headers.get("connection")).toBe("close")
      await expectUnchanged()
    })
  })

  describe("public identifiers", () => {
    const malformed = ["not-an-id", "det-v1-errors-0001", "DET-V1-", "DET-V1-A-", "DET-V2-ABC", "QUAL-V1-" + "A".repeat(65), "DET-V1-A%20B"]

    it("answers 400 invalid-public-id to a malformed publicId on every endpoint that takes one", async () => {
      for (const bad of malformed) {
        expectProblem(await human(bad), 400, "invalid-public-id")
        expectProblem(await request(server, "GET", `/api/v1/trust/${bad}/machine`, { bearer: readKey }), 400, "invalid-public-id")
        expectProblem(await putDetermination(server, bad, determinationBody(asOf)), 400, "invalid-public-id")
      }
    })

    it("answers 404 determination-not-found to a well-formed unknown publicId", async () => {
      for (const unknown of ["DET-V1-UNKNOWN-0001", "QUAL-V1-X", "DET-V1-" + "Z".repeat(64)]) {
        expectProblem(await human(unknown), 404, "determination-not-found")
        expectProblem(await request(server, "GET", `/api/v1/trust/${unknown}/machine`, { bearer: readKey }), 404, "determination-not-found")
      }
    })

    it("stores nothing under a malformed publicId", async () => {
      expectProblem(await putDetermination(server, "DET-V1-lower", determinationBody(asOf)), 400, "invalid-public-id")
      expectProblem(await human("DET-V1-LOWER"), 404, "determination-not-found")
    })
  })

  describe("determination validation", () => {
    const put = (body: unknown) => putDetermination(server, id, body)
    const without = (field: string) => {
      const body: Record<string, unknown> = { ...determinationBody(asOf, { tier: "T4" }) }
      delete body[field]
      return body
    }

    it("refuses an unknown field with 422 naming it", async () => {
      const reply = await put({ ...determinationBody(asOf, { tier: "T4" }), surprise: true })
      expectProblem(reply, 422, "validation-failed")
      expect(pointersOf(reply)).toEqual(["/surprise"])
      const nested = await put({ ...determinationBody(asOf, { tier: "T4" }), engine: { name: "e", version: "1", build: "x" } })
      expectProblem(nested, 422, "validation-failed")
      expect(pointersOf(nested)).toEqual(["/engine/build"])
      await expectUnchanged()
    })

    it("refuses every missing required field with 422 naming it", async () => {
      for (const field of [
        "subject", "tier", "eligible", "why_this_tier", "why_not_higher", "claims", "evidence", "allowed_claims",
        "limitations", "prohibited_inferences", "lifecycle_state", "as_of", "valid_until", "engine"
      ]) {
        const reply = await put(without(field))
        expectProblem(reply, 422, "validation-failed")
        expect(pointersOf(reply), field).toContain(`/${field}`)
      }
      await expectUnchanged()
    })

    it("refuses ill-typed and out-of-range values with 422 naming the field", async () => {
      const base = determinationBody(asOf)
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{ ...base, tier: "T9" }, "/tier"],
        [{ ...base, tier: 2 }, "/tier"],
        [{ ...base, eligible: "yes" }, "/eligible"],
        [{ ...base, lifecycle_state: "ALIVE" }, "/lifecycle_state"],
        [{ ...base, as_of: "yesterday" }, "/as_of"],
        [{ ...base, valid_until: new Date(asOf - DAY_MS).toISOString() }, "/valid_until"],
        [{ ...base, why_this_tier: "one reason" }, "/why_this_tier"],
        [{ ...base, subject: { ...base.subject, subject_id: "" } }, "/subject/subject_id"],
        [{ ...base, evidence: [{ ...base.evidence[0]!, digest: "XYZ" }] }, "/evidence/0/digest"],
        [{ ...base, claims: [{ ...base.claims[0]!, value: 1.5 }] }, "/claims/0/value"],
        [{ ...base, purchase: [] }, "/purchase"]
      ]
      for (const [body, pointer] of cases) {
        const reply = await put(body)
        expectProblem(reply, 422, "validation-failed")
        expect(pointersOf(reply), pointer).toContain(pointer)
      }
      await expectUnchanged()
    })

    it("reports every failing field of one body", async () => {
      const reply = await put({ ...determinationBody(asOf), tier: "T9", eligible: "no", extra: 1 })
      expectProblem(reply, 422, "validation-failed")
      expect(pointersOf(reply)).toEqual(expect.arrayContaining(["/tier", "/eligible", "/extra"]))
      await expectUnchanged()
    })

    it("refuses absurdly deep JSON as a client error, never a 500", async () => {
      let deep: unknown = "leaf"
      for (let i = 0; i < 40; i++) deep = [deep]
      for (const [method, path, body] of [
        ["PUT", `/api/v1/determinations/${id}`, { ...determinationBody(asOf), purchase: { deep } }],
        ["POST", "/api/v1/api-keys", { tenant_id: "t-deep", name: "n", scopes: ["trust:read"], deep }]
      ] as const) {
        expectProblem(await request(server, method, path, { ...asOperator(server), body }), 422, "validation-failed")
      }
      await expectUnchanged()
    })

    it("refuses a body that is JSON but not an object", async () => {
      for (const body of [[], "text", 42, null]) {
        const reply = await request(server, "PUT", `/api/v1/determinations/${id}`, {
          ...asOperator(server), rawBody: JSON.stringify(body), headers: { "content-type": "application/json" }
        })
        expectProblem(reply, 422, "validation-failed")
      }
      await expectUnchanged()
    })

    it("creates nothing when a new determination's body is invalid", async () => {
      const fresh = "DET-V1-ERRORS-NEVER"
      expectProblem(await putDetermination(server, fresh, { ...determinationBody(asOf), tier: "T9" }), 422, "validation-failed")
      expectProblem(await human(fresh), 404, "determination-not-found")
    })
  })

  describe("routes", () => {
    it("answers 404 problem+json to an unknown route", async () => {
      for (const path of ["/nope", "/api/v1/nope", "/api/v1/trust/DET-V1-ERRORS-0001", "/api/v2/trust/DET-V1-ERRORS-0001/human"]) {
        expectProblem(await request(server, "GET", path), 404, "not-found")
      }
      expectProblem(await request(server, "POST", "/api/v1/nope", { body: {} }), 404, "not-found")
    })

    it("answers a method the route does not have with a problem, not a success", async () => {
      const reply = await request(server, "DELETE", `/api/v1/trust/${id}/human`)
      expect([404, 405]).toContain(reply.status)
      expectProblem(reply, reply.status, reply.status === 404 ? "not-found" : "method-not-allowed")
      await expectUnchanged()
    })
  })

  describe("x-pv-internal-token without PV_INTERNAL_TOKEN", () => {
    it("ignores the header", async () => {
      const headers = { "x-pv-internal-token": "anything at all" }
      expect((await request(server, "GET", `/api/v1/trust/${id}/machine`, { bearer: readKey, headers })).status).toBe(200)
      expect((await request(server, "GET", `/api/v1/trust/${id}/human`, { headers })).status).toBe(200)
      expect((await request(server, "GET", "/api/v1/api-keys", { ...asOperator(server), headers })).status).toBe(200)
    })

    it("never grants access on its own", async () => {
      const headers = { "x-pv-internal-token": "anything at all" }
      expectProblem(await request(server, "GET", `/api/v1/trust/${id}/machine`, { headers }), 401, "unauthorized")
      expectProblem(await request(server, "GET", "/api/v1/api-keys", { headers }), 401, "unauthorized")
    })
  })
})
