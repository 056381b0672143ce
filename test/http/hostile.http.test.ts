import { connect } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DAY_MS, determinationBody, relianceRequest } from "../support/fixtures.js"
import { asOperator, createKey, expectProblem, putDetermination, type Reply, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * docs/API.md §2, "text the database cannot keep": NUL characters, lone UTF-16 surrogates, integers
 * beyond a column's range, invalid UTF-8, in bodies, paths and query strings → 400/422 problem+json, never
 * 5xx or 503, and nothing stored. Also: non-JSON media types answered (415) promptly, and the errors Node's
 * HTTP parser produces (400, 431, 417) carry problem+json bodies too.
 */

const kind = process.env.PV_TEST_DB ?? "pglite"

let server: TestServer
let writer: string
let reader: string
let evaluator: string
let trustReader: string
let asOf: number
const subject = "DET-V1-HOSTILE-0001"
/** The determination the refused PUTs target: kept apart from the receipts' subject, so a defect here cannot skew them. */
const target = "DET-V1-HOSTILE-0002"
let baseline: any

const pointersOf = (reply: Reply): Array<string> => (reply.body?.errors ?? []).map((e: { pointer: string }) => e.pointer)

/** A 4xx answer among `allowed`, with a well-formed problem body (whatever its code). */
const expectClientProblem = (reply: Reply, allowed: ReadonlyArray<number>) => {
  expect(allowed, `status ${reply.status}: ${reply.text}`).toContain(reply.status)
  return expectProblem(reply, reply.status, reply.body?.code)
}

/**
 * fetch with a deadline: a request the server never answers fails the test with a clear message instead
 * of hanging until the test time-out.
 */
const send = async (
  method: string,
  path: string,
  options: { bearer?: string; contentType?: string; body?: string | Buffer; timeoutMs?: number } = {}
): Promise<Reply> => {
  const timeoutMs = options.timeoutMs ?? 5_000
  const headers: Record<string, string> = {}
  if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`
  if (options.contentType !== undefined) headers["content-type"] = options.contentType
  let response: Response
  let text: string
  try {
    response = await fetch(server.baseUrl + path, {
      method, headers, signal: AbortSignal.timeout(timeoutMs), ...(options.body === undefined ? {} : { body: options.body })
    })
    text = await response.text()
  } catch (error) {
    if ((error as Error).name === "TimeoutError" || (error as Error).name === "AbortError") {
      throw new Error(`${method} ${path} (content-type ${options.contentType}) got no answer within ${timeoutMs} ms`)
    }
    throw error
  }
  let body: unknown = undefined
  try {
    body = text.length > 0 ? JSON.parse(text) : undefined
  } catch {
    body = undefined
  }
  return { status: response.status, headers: response.headers, body, text }
}

const receiptBody = (principal: string, overrides: Record<string, unknown> = {}): Record<string, unknown> =>
  relianceRequest(subject, principal, overrides)

/** JSON text with `placeholder` (a JSON string) replaced by `rawJsonString` verbatim, so escapes reach the server. */
const withRaw = (value: unknown, placeholder: string, rawJsonString: string) => {
  const text = JSON.stringify(value)
  expect(text).toContain(JSON.stringify(placeholder))
  return text.replace(JSON.stringify(placeholder), rawJsonString)
}

const postReceipt = (rawBody: string | Buffer, contentType = "application/json") =>
  send("POST", "/api/v1/reliance-receipts", { bearer: writer, contentType, body: rawBody })

const human = (publicId: string) => request(server, "GET", `/api/v1/trust/${publicId}/human`)

const expectUnchanged = async () => {
  const now = await human(target)
  expect(now.status).toBe(200)
  expect(now.body.trust_state_digest).toBe(baseline.trust_state_digest)
  expect(now.body).toEqual(baseline)
}

beforeAll(async () => {
  server = await startTestServer()
  asOf = Date.now() - DAY_MS
  writer = (await createKey(server, ["receipt:write", "receipt:read"])).api_key
  reader = (await createKey(server, ["receipt:read"])).api_key
  evaluator = (await createKey(server, ["actionability:read"])).api_key
  trustReader = (await createKey(server, ["trust:read", "mcp:call", "receipt:write"])).api_key
  expect((await putDetermination(server, subject, determinationBody(asOf, { tier: "T3" }))).status).toBe(201)
  expect((await putDetermination(server, target, determinationBody(asOf))).status).toBe(201)
  baseline = (await human(target)).body
  expect(baseline.schema).toBe("pv.machine-trust.v1")
})
afterAll(() => server?.close())

describe(`input the database cannot hold: receipt bodies (${kind})`, () => {
  it("refuses a lone surrogate in organization with 422 at /organization, and stores nothing", async () => {
    const principal = "agent:hostile-org"
    const reply = await postReceipt(withRaw(receiptBody(principal, { organization: "@@BAD@@" }), "@@BAD@@", "\"\\ud800\""))
    expectProblem(reply, 422, "validation-failed")
    expect(pointersOf(reply)).toContain("/organization")
    // Had the bad body been stored (e.g. as U+FFFD), the same idempotency key with another organization would be 409.
    const clean = await postReceipt(JSON.stringify(receiptBody(principal)))
    expect(clean.status, clean.text).toBe(201)
    expect(clean.body.idempotent).toBe(false)
  })

  it("refuses a lone low surrogate and a reversed pair in organization too", async () => {
    for (const [i, raw] of ["\"x\\udfffy\"", "\"\\udc00\\ud800\"", "\"abc\\ud83d\""].entries()) {
      const principal = `agent:hostile-org-${i}`
      const reply = await postReceipt(withRaw(receiptBody(principal, { organization: "@@BAD@@" }), "@@BAD@@", raw))
      expectProblem(reply, 422, "validation-failed")
      expect(pointersOf(reply), raw).toContain("/organization")
      const clean = await postReceipt(JSON.stringify(receiptBody(principal)))
      expect(clean.status, clean.text).toBe(201)
    }
  })

  it("accepts a proper surrogate pair (an astral character is not hostile)", async () => {
    const reply = await postReceipt(withRaw(receiptBody("agent:astral", { organization: "@@BAD@@" }), "@@BAD@@", "\"Acme \\ud83d\\ude00\""))
    expect(reply.status, reply.text).toBe(201)
    expect(reply.body.organization).toBe("Acme \u{1F600}")
  })

  it("refuses a NUL in principal with 422 at /principal, and stores nothing", async () => {
    const reply = await postReceipt(withRaw(receiptBody("@@BAD@@"), "@@BAD@@", "\"agent:nul\\u0000x\""))
    expectProblem(reply, 422, "validation-failed")
    expect(pointersOf(reply)).toContain("/principal")
    // The same refused body again is refused again (never a replay of something stored).
    const again = await postReceipt(withRaw(receiptBody("@@BAD@@"), "@@BAD@@", "\"agent:nul\\u0000x\""))
    expectProblem(again, 422, "validation-failed")
    const clean = await postReceipt(JSON.stringify(receiptBody("agent:nulx")))
    expect(clean.status, clean.text).toBe(201)
  })

  it("refuses NUL and lone surrogates inside claim_scope items with a pointer to the item, and stores nothing", async () => {
    for (const [i, raw] of ["\"ident\\u0000ity\"", "\"\\ud800\""].entries()) {
      const principal = `agent:hostile-scope-${i}`
      const reply = await postReceipt(withRaw(receiptBody(principal, { claim_scope: ["@@BAD@@", "identity"] }), "@@BAD@@", raw))
      expectProblem(reply, 422, "validation-failed")
      expect(pointersOf(reply), raw).toContain("/claim_scope/0")
      // Stored, it would make this (same key, other claim_scope) a 409.
      const clean = await postReceipt(JSON.stringify(receiptBody(principal)))
      expect(clean.status, clean.text).toBe(201)
    }
  })

  it("refuses NUL in the other string fields (tenant_id, subject_public_id, purpose_id, requested_action)", async () => {
    for (const field of ["tenant_id", "subject_public_id", "purpose_id", "requested_action"]) {
      const base = receiptBody(`agent:hostile-${field}`)
      const reply = await postReceipt(withRaw({ ...base, [field]: "@@BAD@@" }, "@@BAD@@", JSON.stringify(`${String(base[field])}\u0000`)))
      expect(reply.status, `${field}: ${reply.text}`).toBeGreaterThanOrEqual(400)
      expect(reply.status, `${field}: ${reply.text}`).toBeLessThan(500)
      expectClientProblem(reply, [400, 403, 404, 422])
    }
  })

  it("refuses a NUL or lone surrogate in an object key with a 4xx problem, and stores nothing", async () => {
    for (const [i, rawKey] of ["\"\\u0000\"", "\"x\\ud800\""].entries()) {
      const principal = `agent:hostile-key-${i}`
      const text = JSON.stringify(receiptBody(principal)).replace(/}$/, `,${rawKey}:1}`)
      const reply = await postReceipt(text)
      expectClientProblem(reply, [400, 422])
      const clean = await postReceipt(JSON.stringify(receiptBody(principal)))
      expect(clean.status, clean.text).toBe(201)
    }
  })

  it("refuses the same through MCP create_reliance_receipt as an argument error, never -32603", async () => {
    const args = receiptBody("@@BAD@@")
    const rpc = { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "create_reliance_receipt", arguments: args } }
    for (const raw of ["\"agent:mcp\\u0000\"", "\"agent:mcp\\ud800\""]) {
      const reply = await request(server, "POST", "/api/v1/mcp", {
        bearer: trustReader,
        rawBody: withRaw(rpc, "@@BAD@@", raw),
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }
      })
      expect(reply.status, reply.text).toBe(200)
      expect(reply.body.id).toBe(7)
      expect(reply.body.error, reply.text).toBeDefined()
      expect([-32602, -32000], reply.text).toContain(reply.body.error.code)
      expect(reply.body.error.data?.code, reply.text).toBe("validation-failed")
    }
  })
})

describe(`input the database cannot hold: determinations and keys (${kind})`, () => {
  const putRaw = (publicId: string, text: string | Buffer, contentType = "application/json") =>
    send("PUT", `/api/v1/determinations/${publicId}`, { bearer: server.operatorToken, contentType, body: text })

  it("refuses NUL and lone surrogates in nested strings with 422 naming the field, and changes nothing", async () => {
    const base = determinationBody(asOf, { tier: "T4" })
    const cases: ReadonlyArray<readonly [unknown, string, string]> = [
      [{ ...base, claims: [{ ...base.claims[0]!, value: "@@BAD@@" }] }, "\"Test\\u0000Co\"", "/claims/0/value"],
      [{ ...base, claims: [{ ...base.claims[0]!, value: "@@BAD@@" }] }, "\"\\ud800\"", "/claims/0/value"],
      [{ ...base, evidence: [{ ...base.evidence[0]!, source: "@@BAD@@" }] }, "\"registry\\u0000\"", "/evidence/0/source"],
      [{ ...base, evidence: [{ ...base.evidence[0]!, source: "@@BAD@@" }] }, "\"\\udfff\"", "/evidence/0/source"],
      [{ ...base, subject: { ...base.subject, subject_id: "@@BAD@@" } }, "\"sub\\u0000\"", "/subject/subject_id"],
      [{ ...base, subject: { ...base.subject, subject_id: "@@BAD@@" } }, "\"sub\\ud800\"", "/subject/subject_id"],
      [{ ...base, why_this_tier: ["@@BAD@@"] }, "\"\\u0000\"", "/why_this_tier/0"],
      [{ ...base, engine: { name: "@@BAD@@", version: "1" } }, "\"e\\ud800\"", "/engine/name"],
      [{ ...base, purchase: { note: "@@BAD@@" } }, "\"\\u0000\"", "/purchase/note"]
    ]
    for (const [value, raw, pointer] of cases) {
      const reply = await putRaw(target, withRaw(value, "@@BAD@@", raw))
      expectProblem(reply, 422, "validation-failed")
      expect(pointersOf(reply), `${pointer} ${raw}`).toContain(pointer)
    }
    await expectUnchanged()
  })

  it("refuses NUL and lone surrogates in a free-form object's keys with a 4xx problem, and changes nothing", async () => {
    const base = determinationBody(asOf, { tier: "T4" })
    for (const rawKey of ["\"\\u0000\"", "\"k\\ud800\""]) {
      const text = withRaw({ ...base, purchase: { "@@KEY@@": 1 } }, "@@KEY@@", rawKey)
      expectClientProblem(await putRaw(target, text), [400, 422])
    }
    await expectUnchanged()
  })

  it("creates nothing when a new determination carries a NUL", async () => {
    const fresh = "DET-V1-HOSTILE-NEW"
    const body = determinationBody(asOf)
    const reply = await putRaw(fresh, withRaw({ ...body, claims: [{ ...body.claims[0]!, value: "@@BAD@@" }] }, "@@BAD@@", "\"\\u0000\""))
    expectProblem(reply, 422, "validation-failed")
    expect(pointersOf(reply)).toContain("/claims/0/value")
    expectProblem(await human(fresh), 404, "determination-not-found")
  })

  it("refuses a NUL or lone surrogate in an API key's name (and tenant) with 422, and creates no key", async () => {
    const tenant = "tenant-hostile-keys"
    for (const [field, raw] of [["name", "\"ci\\u0000\""], ["name", "\"\\ud800\""], ["tenant_id", "\"tenant-hostile-keys\\u0000\""]] as const) {
      const body = { tenant_id: tenant, name: "ci", scopes: ["trust:read"], [field]: "@@BAD@@" }
      const reply = await send("POST", "/api/v1/api-keys", {
        bearer: server.operatorToken, contentType: "application/json", body: withRaw(body, "@@BAD@@", raw)
      })
      expectProblem(reply, 422, "validation-failed")
      expect(pointersOf(reply), raw).toContain(`/${field}`)
    }
    const list = await request(server, "GET", `/api/v1/api-keys?tenant_id=${tenant}`, asOperator(server))
    expect(list.status).toBe(200)
    expect(list.body.keys).toEqual([])
  })
})

describe(`input the database cannot hold: paths and query strings (${kind})`, () => {
  it("answers a NUL in a receipt id with a 4xx problem, never 5xx", async () => {
    for (const id of ["rr_%00", "%00", "rr_01ARZ3NDEKTSV4RRFFQ69G5FA%00", "rr_%ff", "rr_%ED%A0%80"]) {
      const reply = await request(server, "GET", `/api/v1/reliance-receipts/${id}`, { bearer: reader })
      expectClientProblem(reply, [400, 404, 422])
    }
  })

  it("answers a NUL in a publicId with 400 invalid-public-id", async () => {
    expectProblem(await request(server, "GET", "/api/v1/trust/DET-V1-%00/machine", { bearer: trustReader }), 400, "invalid-public-id")
    expectProblem(await request(server, "GET", "/api/v1/trust/DET-V1-A%00B/machine", { bearer: trustReader }), 400, "invalid-public-id")
    expectProblem(await human("DET-V1-%00"), 400, "invalid-public-id")
    expectProblem(await request(server, "PUT", "/api/v1/determinations/DET-V1-%00", {
      ...asOperator(server), body: determinationBody(asOf)
    }), 400, "invalid-public-id")
    for (const bad of ["DET-V1-%ff", "DET-V1-%ED%A0%80"]) {
      expectClientProblem(await request(server, "GET", `/api/v1/trust/${bad}/machine`, { bearer: trustReader }), [400])
    }
  })

  it("answers a NUL in an API key id with a 4xx problem", async () => {
    const reply = await request(server, "DELETE", "/api/v1/api-keys/key_%00", asOperator(server))
    expectClientProblem(reply, [400, 404, 422])
  })

  it("answers a NUL in the api-keys tenant filter with 400/422", async () => {
    const reply = await request(server, "GET", "/api/v1/api-keys?tenant_id=%00", asOperator(server))
    expectClientProblem(reply, [400, 422])
  })

  it("answers 422 to an event cursor beyond the column's range", async () => {
    const ok = await request(server, "GET", `/api/v1/events?public_id=${subject}&after=2147483647`, { bearer: trustReader })
    expect(ok.status, ok.text).toBe(200)
    expect(ok.body.events).toEqual([])
    const reply = await request(server, "GET", `/api/v1/events?public_id=${subject}&after=2147483648`, { bearer: trustReader })
    expectProblem(reply, 422, "validation-failed")
  })

  it("answers 422 to every other out-of-range or malformed after and limit", async () => {
    for (const query of [
      "after=-1", "after=1.5", "after=99999999999999999999", "after=%00",
      "limit=0", "limit=1001", "limit=%00", "limit=-1", "limit=2.5", "limit=99999999999999999999"
    ]) {
      const reply = await request(server, "GET", `/api/v1/events?public_id=${subject}&${query}`, { bearer: trustReader })
      expect(reply.status, `${query}: ${reply.text}`).toBe(422)
      expectProblem(reply, 422, "validation-failed")
    }
  })

  it("answers 422 to numbers that are not plain decimal integers (hex, binary, infinity)", async () => {
    for (const query of ["after=0x10", "after=1e400", "after=Infinity", "limit=0x10", "limit=0b11"]) {
      const reply = await request(server, "GET", `/api/v1/events?public_id=${subject}&${query}`, { bearer: trustReader })
      expect(reply.status, `${query}: ${reply.text}`).toBe(422)
      expectProblem(reply, 422, "validation-failed")
    }
  })

  it("answers %ff, %00 and an encoded lone surrogate in public_id with a 4xx problem", async () => {
    for (const publicId of ["%ff", "%00", "DET-V1-A%00", "DET-V1-%ff", "%ED%A0%80"]) {
      const reply = await request(server, "GET", `/api/v1/events?public_id=${publicId}`, { bearer: trustReader })
      expectClientProblem(reply, [400, 404, 422])
    }
  })
})

describe(`invalid UTF-8 bodies are malformed JSON (RFC 8259 §8.1) (${kind})`, () => {
  /** `{"principal":"<prefix><bytes>",...}` as bytes. */
  const receiptBytes = (prefix: string, bytes: ReadonlyArray<number>) => {
    const text = JSON.stringify(receiptBody("@@BAD@@"))
    const [before, after] = text.split("@@BAD@@") as [string, string]
    return Buffer.concat([Buffer.from(before + prefix, "utf8"), Buffer.from(bytes), Buffer.from(after, "utf8")])
  }
  const invalidSequences: ReadonlyArray<readonly [string, ReadonlyArray<number>]> = [
    ["ff", [0xff]],
    ["overlong", [0xc0, 0xaf]],
    ["encoded surrogate", [0xed, 0xa0, 0x80]],
    ["truncated", [0xe2, 0x82]]
  ]

  it("answers 400 malformed-json to a receipt body with invalid UTF-8, and stores nothing", async () => {
    for (const [name, bytes] of invalidSequences) {
      const prefix = `agent:utf8-${name.replace(/ /g, "-")}-`
      const reply = await postReceipt(receiptBytes(prefix, bytes))
      expectProblem(reply, 400, "malformed-json")
      // Decoded leniently and stored, the bad bytes would have become U+FFFD: this would then be a replay (200).
      const clean = await postReceipt(JSON.stringify(receiptBody(`${prefix}\ufffd`)))
      expect(clean.status, `${name}: ${clean.text}`).toBe(201)
    }
  })

  it("answers 400 malformed-json to a determination body with invalid UTF-8, and changes nothing", async () => {
    const base = determinationBody(asOf, { tier: "T4" })
    const text = JSON.stringify({ ...base, claims: [{ ...base.claims[0]!, value: "@@BAD@@" }] })
    const [before, after] = text.split("@@BAD@@") as [string, string]
    for (const [name, bytes] of invalidSequences) {
      const body = Buffer.concat([Buffer.from(before + "Test Co ", "utf8"), Buffer.from(bytes), Buffer.from(after, "utf8")])
      const reply = await send("PUT", `/api/v1/determinations/${target}`, { bearer: server.operatorToken, contentType: "application/json", body })
      expect(reply.status, name).toBe(400)
      expectProblem(reply, 400, "malformed-json")
    }
    await expectUnchanged()
  })
})

describe(`repeated member names are malformed JSON (I-JSON, RFC 7493) (${kind})`, () => {
  it("answers 400 malformed-json with the pointer to a repeated receipt member, and stores nothing", async () => {
    const principal = "agent:duplicate-member"
    const text = JSON.stringify(receiptBody(principal, { organization: "Acme" })).replace(/^\{/, `{"organization":"Evil",`)
    const reply = await postReceipt(text)
    expectProblem(reply, 400, "malformed-json")
    expect(pointersOf(reply)).toEqual(["/organization"])
    // Had either value been stored, the same idempotency key with this organization would be a replay or a 409.
    const clean = await postReceipt(JSON.stringify(receiptBody(principal, { organization: "Other Co" })))
    expect(clean.status, clean.text).toBe(201)
  })

  it("finds a repeated name at any depth of a determination body, escaped or not, and changes nothing", async () => {
    const base = determinationBody(asOf, { tier: "T4" })
    const text = JSON.stringify(base).replace(`"subject":{`, `"subject":{"\\u0073ubject_id":"S-EVIL",`)
    const reply = await send("PUT", `/api/v1/determinations/${target}`, { bearer: server.operatorToken, contentType: "application/json", body: text })
    expectProblem(reply, 400, "malformed-json")
    expect(pointersOf(reply)).toEqual(["/subject/subject_id"])
    await expectUnchanged()
  })
})

describe(`non-JSON media types are answered 415 at once (${kind})`, () => {
  const refusedTypes = ["application/merge-patch+json", "application/vnd.foo+json", "text/plain"]
  const newId = "DET-V1-HOSTILE-MEDIA"
  const keyTenant = "tenant-hostile-media"

  const endpoints = (): ReadonlyArray<readonly [string, string, string, string]> => [
    ["POST", "/api/v1/reliance-receipts", writer, JSON.stringify(receiptBody("agent:media"))],
    ["POST", "/api/v1/actionability", evaluator, JSON.stringify(receiptBody("agent:media"))],
    ["POST", "/api/v1/api-keys", server.operatorToken, JSON.stringify({ tenant_id: keyTenant, name: "media", scopes: ["trust:read"] })],
    ["PUT", `/api/v1/determinations/${newId}`, server.operatorToken, JSON.stringify(determinationBody(asOf))]
  ]

  it("answers 415 unsupported-media-type within 2.5 s to merge-patch+json, vnd.foo+json and text/plain", async () => {
    for (const [method, path, bearer, body] of endpoints()) {
      for (const contentType of refusedTypes) {
        const started = Date.now()
        const reply = await send(method, path, { bearer, contentType, body, timeoutMs: 2_500 })
        expectProblem(reply, 415, "unsupported-media-type")
        expect(Date.now() - started, `${method} ${path} ${contentType}`).toBeLessThan(2_500)
      }
    }
    // Nothing happened.
    expectProblem(await human(newId), 404, "determination-not-found")
    const keys = await request(server, "GET", `/api/v1/api-keys?tenant_id=${keyTenant}`, asOperator(server))
    expect(keys.body.keys).toEqual([])
  })

  it("accepts application/json; charset=utf-8 on each of them", async () => {
    const expected = [201, 200, 201, 201]
    for (const [i, [method, path, bearer, body]] of endpoints().entries()) {
      const reply = await send(method, path, { bearer, contentType: "application/json; charset=utf-8", body })
      expect(reply.status, `${method} ${path}: ${reply.text}`).toBe(expected[i])
    }
    // The receipt was new: none of the refused attempts stored one.
    const replay = await postReceipt(JSON.stringify(receiptBody("agent:media")))
    expect(replay.status).toBe(200)
    expect(replay.body.idempotent).toBe(true)
  })
})

interface RawResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
  readonly raw: string
}

/** Parse one HTTP/1.1 response out of `buffer`, or null while it is incomplete. */
const parseResponse = (buffer: Buffer, ended: boolean): RawResponse | null => {
  const raw = buffer.toString("latin1")
  const split = raw.indexOf("\r\n\r\n")
  if (split === -1) return null
  const [statusLine, ...lines] = raw.slice(0, split).split("\r\n")
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1] ?? "0")
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(":")
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  const rest = buffer.subarray(Buffer.byteLength(raw.slice(0, split + 4), "latin1"))
  if (headers["content-length"] !== undefined) {
    const length = Number(headers["content-length"])
    if (rest.length < length) return null
    return { status, headers, body: rest.subarray(0, length).toString("utf8"), raw }
  }
  if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
    let offset = 0
    const parts: Array<Buffer> = []
    for (;;) {
      const lineEnd = rest.indexOf("\r\n", offset)
      if (lineEnd === -1) return null
      const size = parseInt(rest.subarray(offset, lineEnd).toString("latin1"), 16)
      if (Number.isNaN(size)) return null
      if (size === 0) return { status, headers, body: Buffer.concat(parts).toString("utf8"), raw }
      if (rest.length < lineEnd + 2 + size + 2) return null
      parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size))
      offset = lineEnd + 2 + size + 2
    }
  }
  return ended ? { status, headers, body: rest.toString("utf8"), raw } : null
}

/** Write `payload` on a fresh connection and read one response (or fail after `timeoutMs`). */
const rawExchange = (payload: string | Buffer, timeoutMs = 3_000) =>
  new Promise<RawResponse>((resolve, reject) => {
    const port = Number(new URL(server.baseUrl).port)
    const socket = connect({ host: "127.0.0.1", port })
    let buffer = Buffer.alloc(0)
    let done = false
    const finish = (ended: boolean) => {
      if (done) return
      const parsed = parseResponse(buffer, ended)
      if (parsed !== null) {
        done = true
        clearTimeout(timer)
        socket.destroy()
        resolve(parsed)
      } else if (ended) {
        done = true
        clearTimeout(timer)
        reject(new Error(`connection closed without a complete response; received: ${JSON.stringify(buffer.toString("latin1"))}`))
      }
    }
    const timer = setTimeout(() => {
      if (done) return
      done = true
      socket.destroy()
      reject(new Error(`no complete response within ${timeoutMs} ms; received: ${JSON.stringify(buffer.toString("latin1").slice(0, 500))}`))
    }, timeoutMs)
    socket.on("connect", () => socket.write(payload))
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk])
      finish(false)
    })
    socket.on("end", () => finish(true))
    socket.on("close", () => finish(true))
    socket.on("error", () => finish(true))
  })

const expectRawProblem = (response: RawResponse, status: number) => {
  expect(response.status, response.raw).toBe(status)
  expect(response.headers["content-type"], response.raw).toMatch(/^application\/problem\+json\b/)
  const body = JSON.parse(response.body)
  expect(body.status).toBe(status)
  expect(body.code).toBeTypeOf("string")
  expect(body.title).toBeTypeOf("string")
  expect(body.type).toBeTypeOf("string")
  expect(body.type).toBe(`urn:pv:problem:${body.code}`)
  expect(response.body).not.toMatch(/\bat .+:\d+:\d+|node_modules|\.ts:\d|stack/i)
  return body
}

describe(`errors of Node's HTTP parser are problem+json (${kind})`, () => {
  it("answers a malformed request line or header with 400 problem+json", async () => {
    for (const payload of ["GET / HTTP/1.1\r\nHost\r\n\r\n", "GARBAGE\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n"]) {
      expectRawProblem(await rawExchange(payload), 400)
    }
  })

  it("answers a header block over maxHeaderBytes (default 16384) with 431 problem+json", async () => {
    const big = `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ${"a".repeat(20_000)}\r\nConnection: close\r\n\r\n`
    expectRawProblem(await rawExchange(big), 431)
    // Under the limit is served normally.
    const fits = await rawExchange(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ${"a".repeat(12_000)}\r\nConnection: close\r\n\r\n`)
    expect(fits.status, fits.raw).toBe(200)
  })

  it("answers an unknown expectation with 417 problem+json", async () => {
    expectRawProblem(await rawExchange("GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-foo\r\nConnection: close\r\n\r\n"), 417)
  })

  it("keeps serving after parser errors", async () => {
    expect((await request(server, "GET", "/healthz")).status).toBe(200)
  })
})
