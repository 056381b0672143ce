import * as fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Scopes } from "../../src/domain/ApiKey.js"
import { findDuplicateMember } from "../../src/domain/Json.js"
import {
  checkExchange,
  describeInput,
  Findings,
  forAllSampled,
  hostileNumberText,
  nested,
  pathOf,
  percentSegments,
  problemViolation,
  unstorableString
} from "../support/authz/fuzz.js"
import { buildRequest, rawRequest } from "../support/authz/rawHttp.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { asOperator, createKey, expectProblem, putDetermination, type Reply, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * HTTP fuzzing (docs/API.md §2, §4.3, §5, §12, §13): generated requests, raw (node:net, so malformed bytes really
 * reach the server) and through fetch, to real endpoints with a valid key and without. Every answer must
 * arrive within a few seconds (or the connection close), never be 5xx, and every non-2xx answer (but 304)
 * must be problem+json; JSON-RPC answers must follow JSON-RPC 2.0. Seeds are fixed: a failure reproduces.
 *
 * With a fixed seed a property's requests are a fixed sample, and a smaller count is a prefix of a larger one.
 * Each count is where that prefix already holds every value of every pool its generators draw from (methods,
 * targets, versions, header mutations, body kinds, content types, tools, ids) and every pairing the property is
 * about (REST bodies: each endpoint with each kind of body, 40 of 40; headers: each base request under each
 * first mutation, 124 of 126; tool arguments: each tool with the bad value as a key and as a value, 16 of 16);
 * more requests repeat those values with other random parts. JSON-RPC envelopes, whose nested batches keep
 * adding shapes (a tool call inside a batch inside a batch), meet that mark last, at 800.
 */

const TIMEOUT_MS = 5_000
const db = process.env.PV_TEST_DB ?? "pglite"

let server: TestServer
const id = "DET-V1-FUZZ-0001"
const neverId = "DET-V1-FUZZ-NEVER"
const tenant = "tenant-fuzz"
let detBody: ReturnType<typeof determinationBody>
let key: string
let receiptId: string
let setupReceipt: Record<string, unknown>
let baseline: { readonly human: unknown; readonly digest: string; readonly etag: string | null; readonly head: number }
/** Receipt ids any fuzzed request got back with a 2xx: requests built to be invalid must store nothing. */
const storedByFuzz = new Set<string>()

const receiptBody = (principal: string, tenantId = tenant): Record<string, unknown> => ({
  tenant_id: tenantId,
  organization: "Fuzz Buyers",
  principal,
  subject_public_id: id,
  purpose_id: "supplier-onboarding",
  requested_action: "screen",
  claim_scope: ["identity", "assurance"]
})

const headFor = (bearer: "key" | "operator" | "none" | string): ReadonlyArray<readonly [string, string]> =>
  bearer === "none" ? [] : [["Authorization", `Bearer ${bearer === "key" ? key : bearer === "operator" ? server.operatorToken : bearer}`]]

const host = () => new URL(server.baseUrl).host

/** fetch with a time-out; a refusal or a hang is reported as a reply with status 0 and the reason. */
const fetchReply = async (method: string, path: string, headers: Record<string, string>, body?: Buffer): Promise<Reply & { readonly failure?: string }> => {
  try {
    const response = await fetch(server.baseUrl + path, {
      method, headers, ...(body === undefined ? {} : { body }), signal: AbortSignal.timeout(TIMEOUT_MS)
    })
    const text = await response.text()
    let parsed: unknown = undefined
    try {
      parsed = text.length > 0 ? JSON.parse(text) : undefined
    } catch {
      parsed = undefined
    }
    return { status: response.status, headers: response.headers, body: parsed, text }
  } catch (error) {
    const name = (error as Error).name
    return { status: 0, headers: new Headers(), body: undefined, text: "", failure: name === "TimeoutError" ? "hang" : `closed (${(error as Error).message})` }
  }
}

/** Generic checks for a fetch reply, including time-outs and connections closed without an answer. */
const checkFetch = (findings: Findings, label: string, input: unknown, reply: Reply & { readonly failure?: string }, options: { readonly mcp?: boolean } = {}) => {
  if (reply.failure === "hang") return findings.add(`no answer within ${TIMEOUT_MS / 1000} s (hang)`, `${label}: ${describeInput(input)}`)
  if (reply.failure !== undefined) return findings.add(`connection closed without an answer to a complete request`, `${label}: ${describeInput(input)}`)
  checkExchange(findings, label, input, reply, options)
}

beforeAll(async () => {
  server = await startTestServer()
  detBody = determinationBody(Date.now() - DAY_MS)
  expect((await putDetermination(server, id, detBody)).status).toBe(201)
  key = (await createKey(server, Scopes, {
    tenant_id: tenant, name: "fuzz, every scope", rate_limit_per_minute: 1_000_000, daily_quota: 1_000_000_000
  })).api_key
  const created = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody("fuzz:setup") })
  expect(created.status, created.text).toBe(201)
  setupReceipt = created.body
  receiptId = created.body.receipt_id
  const human = await request(server, "GET", `/api/v1/trust/${id}/human`)
  const machine = await request(server, "GET", `/api/v1/trust/${id}/machine`, { bearer: key })
  const events = await request(server, "GET", `/api/v1/events?public_id=${id}`, { bearer: key })
  expect(human.status).toBe(200)
  baseline = { human: human.body, digest: human.body.trust_state_digest, etag: machine.headers.get("etag"), head: events.body.head.sequence }
})
afterAll(() => server?.close())

// ---- arbitraries over the running server's ids (built lazily: the ids exist once beforeAll ran) ----

const byteChar = fc.integer({ min: 0, max: 255 }).map((n) => String.fromCharCode(n))
const realTargets = () => [
  "/healthz", "/readyz", "/openapi.json", "/docs", `/api/v1/trust/${id}/machine`, `/api/v1/trust/${id}/human`,
  "/api/v1/reliance-receipts", `/api/v1/reliance-receipts/${receiptId}`, "/api/v1/actionability", "/api/v1/policy", "/api/v1/mcp",
  `/api/v1/events?public_id=${id}`, "/api/v1/events/keys", `/api/v1/determinations/${id}`, "/api/v1/api-keys", "/log/checkpoint"
]

const queryValue = fc.oneof(
  fc.constantFrom(
    "0", "1", "-1", "1.5", "1e3", "99999999999999999999999", "9223372036854775808", "2147483648", "-9223372036854775809", "NaN",
    "Infinity", "0x10", "", "%00", "1%00", "%ff", "%ED%A0%80", "%20", "+1", "1000", "1001", "00000000000000000001", "1e400"
  ),
  fc.integer().map(String),
  fc.double().map(String)
)
const eventsTarget = () =>
  fc.record({
    publicId: fc.constantFrom(id, "DET-V1-NOPE-0001", "det-v1-x", "%00", `${id}%00`, "%ED%A0%80", "", `${id}%ff`),
    after: fc.option(queryValue, { nil: undefined }),
    limit: fc.option(queryValue, { nil: undefined }),
    duplicate: fc.boolean()
  }).map(({ publicId, after, limit, duplicate }) =>
    `/api/v1/events?public_id=${publicId}${after === undefined ? "" : `&after=${after}`}${limit === undefined ? "" : `&limit=${limit}`}` +
    (duplicate ? "&limit=2&after=0&public_id=x" : ""))

const segment = fc.oneof(
  fc.constantFrom(
    "api", "v1", "trust", id, "machine", "human", "..", ".", "reliance-receipts", "actionability", "policy", "mcp", "events", "keys",
    "determinations", "api-keys", "log", "checkpoint", "tile", "entries", "proof", "healthz", "", "rr_01ARZ3NDEKTSV4RRFFQ69G5FAV"
  ),
  fc.constantFrom(...percentSegments),
  fc.stringOf(fc.constantFrom(..."abcXYZ019-_.~%:@!$&'()*+,;=".split("")), { maxLength: 12 }),
  fc.stringOf(byteChar, { maxLength: 6 })
)

const targetArb = () => fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...realTargets()) },
  { weight: 4, arbitrary: fc.tuple(fc.constantFrom("", "/api/v1"), fc.array(segment, { maxLength: 6 })).map(([p, s]) => `${p}/${s.join("/")}`) },
  { weight: 3, arbitrary: eventsTarget() },
  { weight: 1, arbitrary: fc.constantFrom(1_000, 8_000, 17_000, 70_000).map((n) => `/api/v1/trust/${"A".repeat(n)}/human`) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "*", "http://127.0.0.1/healthz", "//healthz", "healthz", "/healthz#frag", "/healthz?%00", "/%2e%2e/%2e%2e/etc/passwd",
      "/api/v1/../../healthz", `/api/v1/trust/${id}%00/human`, `/api/v1/trust/${id}%ff/human`, "/api/v1/trust/%ED%A0%80/human",
      "/api/v1/reliance-receipts/rr_%00", "/api/v1/reliance-receipts/%ED%A0%80", "/api/v1/api-keys/key_%ff", "/api/v1/api-keys?tenant_id=%00",
      "/api/v1/api-keys?tenant_id=%ED%A0%80", `/api/v1/trust/${id}/machine?x=%00`, "/api/v1/mcp?%ff", "/log/proof/inclusion?index=-1&tree_size=1e400",
      "/log/proof/consistency?first=99999999999999999999&second=%00", "/log/tile/0/0", "/log/tile/entries/%00"
    )
  }
)

const methodArb = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE") },
  { weight: 2, arbitrary: fc.constantFrom("get", "post", "Put", "dElEtE", "PROPFIND", "MKCOL", "QUERY", "BREW", "SEARCH", "PURGE", "LINK", "M-SEARCH") },
  { weight: 2, arbitrary: fc.constantFrom("", "G ET", "GE\u0000T", "\u00ff\u00fe", "GET\t", "X".repeat(64), "G\u0080T", "1GET", "{", "GET\u000b") },
  { weight: 1, arbitrary: fc.stringOf(byteChar, { minLength: 1, maxLength: 10 }) }
)

const versionArb = fc.oneof(
  { weight: 12, arbitrary: fc.constant("HTTP/1.1") },
  { weight: 1, arbitrary: fc.constantFrom("HTTP/1.0", "HTTP/2.0", "HTTP/1.2", "http/1.1", "HTTP/1.1 extra", "", "HTTP/9.9", "HTTP/1.1\u0000") }
)

// ---- header mutations ----

type Mutation =
  | { readonly m: "dup-cl"; readonly same: boolean }
  | { readonly m: "cl-and-te" }
  | { readonly m: "te"; readonly value: string }
  | { readonly m: "cl"; readonly value: string }
  | { readonly m: "big-header"; readonly name: string; readonly size: number }
  | { readonly m: "many-headers"; readonly count: number }
  | { readonly m: "raw-line"; readonly line: string }
  | { readonly m: "expect"; readonly value: string }
  | { readonly m: "content-type"; readonly value: string | undefined }
  | { readonly m: "no-host" }
  | { readonly m: "dup-host" }
  | { readonly m: "authorization"; readonly values: ReadonlyArray<string> }
  | { readonly m: "accept"; readonly value: string }
  | { readonly m: "connection"; readonly value: string }

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.boolean().map((same) => ({ m: "dup-cl", same }) as const),
  fc.constant({ m: "cl-and-te" } as const),
  fc.constantFrom("gzip", "chunked, gzip", "xchunked", "chunked;q=1", "identity", "chunked\u0000", "gzip, chunked", "chunked, chunked", "\u00ffchunked", "chunked")
    .map((value) => ({ m: "te", value }) as const),
  fc.constantFrom("-1", "abc", "1e3", "99999999999999999999", " 2", "0x10", "+2", "", "2, 2").map((value) => ({ m: "cl", value }) as const),
  fc.record({ name: fc.constantFrom("X-Big", "Authorization", "Cookie", "Content-Type"), size: fc.constantFrom(9_000, 17_000, 40_000, 70_000) })
    .map(({ name, size }) => ({ m: "big-header", name, size }) as const),
  fc.constantFrom(100, 2_100).map((count) => ({ m: "many-headers", count }) as const),
  fc.constantFrom(
    "X-Bad: a\u0000b", "X-Bad: a\u007fb", "X Bad: v", "X-Bad\u0001: v", "NoColonHere", " folded-continuation", "X-Bad: a\rb", ": empty-name",
    "X-Latin1: \u00ff\u00fe", "X-Bad\u00ff: v", "X-Tab:\tv", "X-Bad : space-before-colon", "X-Utf8: \u00c3\u00a9"
  ).map((line) => ({ m: "raw-line", line }) as const),
  fc.constantFrom("100-continue", "something", "", "100-Continue, foo").map((value) => ({ m: "expect", value }) as const),
  fc.constantFrom(
    "application/json", "application/merge-patch+json", "application/problem+json", "application/vnd.api+json", "text/plain", undefined,
    "application/json; charset=utf-16", "APPLICATION/JSON", "application/x-www-form-urlencoded", "\u00ff", "application/json;", "multipart/form-data; boundary=x",
    "application/jsonx", "application/json-seq"
  ).map((value) => ({ m: "content-type", value }) as const),
  fc.constant({ m: "no-host" } as const),
  fc.constant({ m: "dup-host" } as const),
  fc.constantFrom<ReadonlyArray<string>>(
    ["Bearer"], ["Bearer  "], ["Basic Zm9vOmJhcg=="], ["Bearer pv_live_\u00ff\u00fe"], ["Bearer a,Bearer b"], ["bearer KEY"], ["Bearer KEY", "Bearer KEY"],
    ["Bearer KEY", "Bearer pv_live_x"], ["Bearer KEY\u0000"], ["Bearer " + "x".repeat(5_000)]
  ).map((values) => ({ m: "authorization", values }) as const),
  fc.constantFrom("text/event-stream", "*/*", "application/json;q=0", "\u00ff", "").map((value) => ({ m: "accept", value }) as const),
  fc.constantFrom("keep-alive", "upgrade", "close, te", "Upgrade", "\u00ff").map((value) => ({ m: "connection", value }) as const)
)

interface BaseRequest {
  readonly method: string
  readonly target: () => string
  readonly auth: "key" | "operator" | "none"
  readonly body?: () => string
}
const baseRequests: ReadonlyArray<BaseRequest> = [
  { method: "GET", target: () => `/api/v1/trust/${id}/machine`, auth: "key" },
  { method: "GET", target: () => `/api/v1/trust/${id}/human`, auth: "none" },
  { method: "POST", target: () => "/api/v1/actionability", auth: "key", body: () => JSON.stringify(receiptBody("fuzz:headers")) },
  { method: "PUT", target: () => `/api/v1/determinations/${id}`, auth: "operator", body: () => JSON.stringify(detBody) },
  { method: "POST", target: () => "/api/v1/mcp", auth: "key", body: () => JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) },
  { method: "GET", target: () => `/api/v1/events?public_id=${id}`, auth: "key" },
  // A prohibited field: refused (422) whatever else happens, so nothing is stored.
  { method: "POST", target: () => "/api/v1/reliance-receipts", auth: "key", body: () => JSON.stringify({ ...receiptBody("fuzz:headers"), tier: "T4" }) },
  // A repeated member name (I-JSON): refused (400) whatever else happens, so nothing is stored.
  { method: "POST", target: () => "/api/v1/reliance-receipts", auth: "key", body: () => JSON.stringify(receiptBody("fuzz:headers")).replace(/^\{/, `{"principal":"fuzz:first-of-two",`) },
  { method: "POST", target: () => "/api/v1/api-keys", auth: "operator", body: () => JSON.stringify({ tenant_id: "tenant-fuzz-new", name: "n", scopes: [] }) }
]

const chunk = (body: Buffer): Buffer =>
  Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from("\r\n0\r\n\r\n")])

/** Builds the bytes of a base request under a list of mutations; the body always matches the framing sent. */
const mutatedRequest = (base: BaseRequest, mutations: ReadonlyArray<Mutation>): Buffer => {
  const body = base.body === undefined ? undefined : Buffer.from(base.body(), "utf8")
  const headers: Array<readonly [string, string] | string> = []
  let hostLines: Array<string> = [`Host: ${host()}`]
  let contentType: string | undefined = body === undefined ? undefined : "application/json"
  let authorization: Array<string> = base.auth === "none" ? [] : [`Bearer ${base.auth === "key" ? key : server.operatorToken}`]
  let framing: "cl" | "chunked" | "te-other" = "cl"
  const clLines: Array<string> = []
  let teLines: Array<string> = []
  for (const mutation of mutations) {
    switch (mutation.m) {
      case "dup-cl":
        clLines.push(mutation.same ? String(body?.length ?? 0) : String((body?.length ?? 0) + 1))
        break
      case "cl-and-te":
        framing = "chunked"
        teLines = ["chunked"]
        clLines.push(String(body?.length ?? 0))
        break
      case "te":
        teLines = [mutation.value]
        framing = mutation.value.trim().toLowerCase().endsWith("chunked") && !mutation.value.includes("\u0000") ? "chunked" : "te-other"
        break
      case "cl":
        clLines.push(mutation.value)
        break
      case "big-header":
        if (mutation.name === "Authorization") authorization = [`Bearer ${"k".repeat(mutation.size)}`]
        else if (mutation.name === "Content-Type") contentType = `application/json; x=${"y".repeat(mutation.size)}`
        else headers.push([mutation.name, "v".repeat(mutation.size)])
        break
      case "many-headers":
        for (let i = 0; i < mutation.count; i++) headers.push([`X-Many-${i}`, "v".repeat(20)])
        break
      case "raw-line":
        headers.push(mutation.line)
        break
      case "expect":
        headers.push(["Expect", mutation.value])
        break
      case "content-type":
        contentType = mutation.value
        break
      case "no-host":
        hostLines = []
        break
      case "dup-host":
        hostLines = [`Host: ${host()}`, "Host: evil.example"]
        break
      case "authorization":
        authorization = mutation.values.map((v) => v.replace("KEY", key))
        break
      case "accept":
        headers.push(["Accept", mutation.value])
        break
      case "connection":
        headers.push(["Connection", mutation.value])
        if (mutation.value.toLowerCase() === "upgrade") headers.push(["Upgrade", "websocket"])
        break
    }
  }
  const lines: Array<readonly [string, string] | string> = [...hostLines]
  if (!headers.some((h) => Array.isArray(h) && (h as readonly [string, string])[0] === "Connection")) lines.push(["Connection", "close"])
  for (const a of authorization) lines.push(["Authorization", a])
  if (contentType !== undefined) lines.push(["Content-Type", contentType])
  // Content-Length: the true length unless a mutation replaced it ("cl"); a duplicate ("dup-cl") comes beside it.
  const replaced = mutations.some((m) => m.m === "cl")
  const contentLengths = framing === "cl" && body !== undefined && !replaced ? [String(body.length), ...clLines] : clLines
  for (const cl of contentLengths) lines.push(["Content-Length", cl])
  for (const te of teLines) lines.push(["Transfer-Encoding", te])
  lines.push(...headers)
  const sent = body === undefined ? undefined : framing === "chunked" ? chunk(body) : body
  return buildRequest(`${base.method} ${base.target()} HTTP/1.1`, lines, sent)
}

// ---- REST bodies ----

type BodyEndpoint = "receipts" | "actionability" | "put-existing" | "put-new" | "api-keys"
const bodyEndpoints: Record<BodyEndpoint, { readonly method: string; readonly path: () => string; readonly auth: "key" | "operator"; readonly template: () => unknown }> = {
  "receipts": { method: "POST", path: () => "/api/v1/reliance-receipts", auth: "key", template: () => receiptBody("fuzz:body") },
  "actionability": { method: "POST", path: () => "/api/v1/actionability", auth: "key", template: () => receiptBody("fuzz:body") },
  "put-existing": { method: "PUT", path: () => `/api/v1/determinations/${id}`, auth: "operator", template: () => ({ ...detBody, purchase: { order: "po-1" } }) },
  "put-new": { method: "PUT", path: () => `/api/v1/determinations/${neverId}`, auth: "operator", template: () => detBody },
  "api-keys": {
    method: "POST", path: () => "/api/v1/api-keys", auth: "operator",
    template: () => ({ tenant_id: "tenant-fuzz-new", name: "fuzzed", scopes: ["trust:read"], rate_limit_per_minute: 10 })
  }
}

/** Every pointer to a leaf of a JSON value, with the leaf. */
const leaves = (value: unknown, pointer = ""): Array<readonly [string, unknown]> => {
  if (typeof value !== "object" || value === null) return [[pointer, value]]
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value)
  return entries.flatMap(([k, v]) => leaves(v, `${pointer}/${k.replace(/~/g, "~0").replace(/\//g, "~1")}`))
}

const setAt = (value: unknown, pointer: string, leaf: unknown): unknown => {
  const copy = structuredClone(value) as Record<string, unknown>
  const parts = pointer.split("/").slice(1).map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
  let node: any = copy
  for (const part of parts.slice(0, -1)) node = node[part]
  node[parts.at(-1)!] = leaf
  return copy
}

const PLACEHOLDER = "__pv_fuzz_placeholder__"

type BodyKind =
  | { readonly k: "random"; readonly value: unknown }
  | { readonly k: "unstorable"; readonly pick: number; readonly value: string }
  | { readonly k: "unstorable-key"; readonly name: string }
  | { readonly k: "number"; readonly pick: number; readonly text: string }
  | { readonly k: "deep"; readonly depth: number; readonly arrays: boolean }
  | { readonly k: "invalid-utf8"; readonly pick: number; readonly bytes: ReadonlyArray<number> }
  | { readonly k: "escapes"; readonly pick: number; readonly escape: string }
  | { readonly k: "text"; readonly text: string }

const bodyKindArb: fc.Arbitrary<BodyKind> = fc.oneof(
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((value) => ({ k: "random", value }) as const) },
  { weight: 4, arbitrary: fc.record({ pick: fc.nat(), value: unstorableString }).map((r) => ({ k: "unstorable", ...r }) as const) },
  { weight: 1, arbitrary: unstorableString.map((name) => ({ k: "unstorable-key", name }) as const) },
  {
    weight: 2,
    arbitrary: fc.record({ pick: fc.nat(), text: hostileNumberText.filter((t) => !["-0", "1e-400"].includes(t)) })
      .map((r) => ({ k: "number", ...r }) as const)
  },
  { weight: 1, arbitrary: fc.record({ depth: fc.integer({ min: 33, max: 2_000 }), arrays: fc.boolean() }).map((r) => ({ k: "deep", ...r }) as const) },
  {
    weight: 2,
    arbitrary: fc.record({
      pick: fc.nat(),
      bytes: fc.constantFrom([0xff], [0xfe], [0x80], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x82], [0xf4, 0x90, 0x80, 0x80])
    }).map((r) => ({ k: "invalid-utf8", ...r }) as const)
  },
  {
    weight: 2,
    arbitrary: fc.record({ pick: fc.nat(), escape: fc.constantFrom("\\u0000", "\\ud800", "\\udfff", "a\\u0000b", "\\udbff\\u0000", "\\uDC00x") })
      .map((r) => ({ k: "escapes", ...r }) as const)
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom("", "{", "[", "nul", "{\"a\":1}}", "\ufeff{}", "{'a':1}", "{\"a\":01}", "{\"a\":NaN}", "{\"a\":.5}", "[1,]", "\u0000")
      .map((text) => ({ k: "text", text }) as const)
  }
)

/** The string leaves of a template (where an unstorable string can go) and every leaf (where a number can). */
const stringLeaves = (template: unknown) => leaves(template).filter(([, v]) => typeof v === "string")

/** The body bytes for a kind, and the pointer of the field it spoiled (when there is one). */
const bodyBytes = (template: unknown, kind: BodyKind): { readonly bytes: Buffer; readonly pointer?: string; readonly expectMalformed: boolean } => {
  const strings = stringLeaves(template)
  switch (kind.k) {
    case "random":
      return { bytes: Buffer.from(JSON.stringify(kind.value) ?? "null", "utf8"), expectMalformed: false }
    case "unstorable": {
      const [pointer] = strings[kind.pick % strings.length]!
      return { bytes: Buffer.from(JSON.stringify(setAt(template, pointer, kind.value)), "utf8"), pointer, expectMalformed: false }
    }
    case "unstorable-key":
      return { bytes: Buffer.from(JSON.stringify({ ...(template as object), [kind.name]: "x" }), "utf8"), expectMalformed: false }
    case "number": {
      const all = leaves(template)
      const [pointer] = all[kind.pick % all.length]!
      const text = JSON.stringify(setAt(template, pointer, PLACEHOLDER)).replace(`"${PLACEHOLDER}"`, kind.text)
      return { bytes: Buffer.from(text, "utf8"), pointer, expectMalformed: false }
    }
    case "deep": {
      // Where the determination allows any JSON (purchase) or in the first string field otherwise.
      const pointer = (template as Record<string, unknown>).purchase !== undefined ? "/purchase" : strings[0]![0]
      return { bytes: Buffer.from(JSON.stringify(setAt(template, pointer, nested(kind.depth, "leaf", kind.arrays))), "utf8"), pointer, expectMalformed: false }
    }
    case "invalid-utf8": {
      const [pointer] = strings[kind.pick % strings.length]!
      const [head, tail] = JSON.stringify(setAt(template, pointer, PLACEHOLDER)).split(PLACEHOLDER) as [string, string]
      return { bytes: Buffer.concat([Buffer.from(head + "ok"), Buffer.from(kind.bytes), Buffer.from("ok" + tail)]), pointer, expectMalformed: true }
    }
    case "escapes": {
      const [pointer] = strings[kind.pick % strings.length]!
      const text = JSON.stringify(setAt(template, pointer, PLACEHOLDER)).replace(PLACEHOLDER, `x${kind.escape}y`)
      return { bytes: Buffer.from(text, "utf8"), pointer, expectMalformed: false }
    }
    case "text":
      return { bytes: Buffer.from(kind.text, "utf8"), expectMalformed: true }
  }
}

const contentTypeArb = fc.oneof(
  { weight: 12, arbitrary: fc.constant("application/json") },
  { weight: 1, arbitrary: fc.constant("application/json; charset=utf-8") },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "application/merge-patch+json", "application/vnd.api+json", "application/problem+json", "text/plain", "MISSING",
      "application/x-www-form-urlencoded", "application/json-patch+json"
    )
  }
)

const isPlainJson = (contentType: string) => /^application\/json\s*(;.*)?$/i.test(contentType)

// ---- JSON-RPC ----

const OMIT = Symbol("omit")
const toolNames = [
  "resolve_trust", "resolve_subject", "compare_current", "resolve_lifecycle", "evaluate_actionability", "create_reliance_receipt",
  "get_reliance_receipt", "subscribe_trust_changes"
]

/** Valid arguments per tool (before any spoiling). Receipt-writing ones name another tenant, so nothing is stored. */
const toolArguments = (tool: string, otherTenantForWrites: boolean): Record<string, unknown> => {
  switch (tool) {
    case "resolve_trust":
    case "resolve_lifecycle":
    case "subscribe_trust_changes":
      return { public_id: id }
    case "resolve_subject":
      return { subject_id: "sub_test" }
    case "compare_current":
      return { public_id: id, trust_state_digest: baseline.digest }
    case "evaluate_actionability":
      return receiptBody("fuzz:mcp")
    case "create_reliance_receipt":
      return receiptBody("fuzz:mcp", otherTenantForWrites ? "tenant-other" : tenant)
    case "get_reliance_receipt":
      return { receipt_id: receiptId }
    default:
      return {}
  }
}

const idArb = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 10 }) },
  { weight: 4, arbitrary: fc.integer() },
  { weight: 1, arbitrary: fc.double() },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, 0, -1, 1.5, 1e21, 2 ** 53 + 2, "", "\u0000", "\ud800", true, -0.5) },
  { weight: 1, arbitrary: fc.oneof(fc.object({ maxDepth: 1 }), fc.array(fc.integer(), { maxLength: 3 })) }
)
const rpcMethodArb = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      "initialize", "ping", "tools/list", "tools/call", "tools/call", "tools/call", "notifications/initialized", "notifications/cancelled"
    )
  },
  { weight: 2, arbitrary: fc.constantFrom("resources/list", "prompts/list", "", "rpc.discover", "PING", "tools/call ", "tools/", "\u0000", "\ud800") },
  { weight: 1, arbitrary: fc.string({ maxLength: 16 }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(1, null, ["ping"], { m: 1 }, true) }
)
const toolParamsArb = () => fc.record({
  name: fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...toolNames) }, { weight: 1, arbitrary: fc.string({ maxLength: 12 }) }),
  args: fc.oneof(
    { weight: 3, arbitrary: fc.constant("template") },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
    { weight: 2, arbitrary: fc.record({ pick: fc.nat(), value: unstorableString }) }
  ),
  extra: fc.option(fc.constantFrom<Record<string, unknown>>({ _meta: { progressToken: 1 } }, { extra: 1 }), { nil: undefined })
}).map(({ name, args, extra }) => {
  let argumentsValue: unknown = toolArguments(name, true)
  if (args !== "template") {
    if (typeof args === "object" && args !== null && "pick" in args && "value" in args && typeof args.value === "string") {
      const strings = stringLeaves(argumentsValue)
      argumentsValue = strings.length === 0 ? { x: args.value } : setAt(argumentsValue, strings[(args.pick as number) % strings.length]![0], args.value)
    } else argumentsValue = args
  }
  return { name, arguments: argumentsValue, ...extra }
})
const rpcParamsArb = () => fc.oneof(
  { weight: 3, arbitrary: fc.constant<unknown>(OMIT) },
  { weight: 4, arbitrary: toolParamsArb() },
  { weight: 1, arbitrary: fc.constantFrom<unknown>({ protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "fuzz", version: "0" } }, { protocolVersion: 1 }) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) }
)

const messageArb = () => fc.record({
  jsonrpc: fc.oneof({ weight: 12, arbitrary: fc.constant<unknown>("2.0") }, { weight: 1, arbitrary: fc.constantFrom<unknown>(OMIT, "1.0", 2, "2", null) }),
  id: fc.oneof({ weight: 4, arbitrary: idArb }, { weight: 1, arbitrary: fc.constant<unknown>(OMIT) }),
  method: fc.oneof({ weight: 12, arbitrary: rpcMethodArb }, { weight: 1, arbitrary: fc.constant<unknown>(OMIT) }),
  params: rpcParamsArb(),
  reply: fc.oneof({ weight: 12, arbitrary: fc.constant<unknown>(OMIT) }, { weight: 1, arbitrary: fc.constantFrom<unknown>({ result: {} }, { error: { code: 1, message: "x" } }, { result: 1, error: {} }) })
}).map(({ jsonrpc, id: rid, method, params, reply }) => {
  const message: Record<string, unknown> = {}
  if (jsonrpc !== OMIT) message.jsonrpc = jsonrpc
  if (rid !== OMIT) message.id = rid
  if (method !== OMIT) message.method = method
  if (params !== OMIT) message.params = params
  if (reply !== OMIT) Object.assign(message, reply)
  return message
})

const envelopeArb = () => fc.oneof(
  { weight: 6, arbitrary: messageArb().map((m) => JSON.stringify(m)) },
  { weight: 3, arbitrary: fc.array(messageArb(), { maxLength: 6 }).map((b) => JSON.stringify(b)) },
  { weight: 1, arbitrary: fc.tuple(messageArb(), messageArb()).map(([a, b]) => JSON.stringify([[a], b, [], [[b]]])) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "", "{", "[", "null", "1", "\"x\"", "[{]", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"", "\u0000", "[]", "[[]]", "{}", "[{}]", "\ufeff{}",
      "{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"ping\"}", "{\"jsonrpc\":\"2.0\",\"id\":9223372036854775808,\"method\":\"ping\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":\"\\ud800\",\"method\":\"ping\"}", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"id\":2}"
    )
  },
  { weight: 1, arbitrary: fc.integer({ min: 33, max: 400 }).map((depth) => JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping", params: { deep: nested(depth) } })) }
)

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const isRequestId = (u: unknown) => typeof u === "string" || (typeof u === "number" && Number.isFinite(u))

/** Nesting depth of a JSON value (a scalar is 0, `{}` and `[]` are 1). */
const depthOf = (value: unknown): number =>
  typeof value !== "object" || value === null ? 0 : 1 + Math.max(0, ...Object.values(value).map(depthOf))

/**
 * JSON-RPC 2.0 (docs/API.md §12.1: ids are strings or numbers) classification of one message. A message
 * nested deeper than 32 levels is refused as an invalid request (docs/API.md §4.3 and §12.1: -32600).
 */
const kindOf = (m: unknown): "request" | "notification" | "response" | "invalid" => {
  if (!isRecord(m) || m.jsonrpc !== "2.0" || depthOf(m) > 32) return "invalid"
  if (Object.hasOwn(m, "method")) {
    if (typeof m.method !== "string") return "invalid"
    if (Object.hasOwn(m, "params") && (typeof m.params !== "object" || m.params === null)) return "invalid"
    if (!Object.hasOwn(m, "id")) return "notification"
    return isRequestId(m.id) ? "request" : "invalid"
  }
  const answer = Object.hasOwn(m, "result") !== Object.hasOwn(m, "error")
  return answer && Object.hasOwn(m, "id") && (m.id === null || isRequestId(m.id)) ? "response" : "invalid"
}

const allowedCodes = [-32700, -32600, -32601, -32602, -32000]

/** docs/API.md §12 and JSON-RPC 2.0 for one POST body and its answer; violations go to `findings`. */
const checkJsonRpc = (findings: Findings, text: string, reply: Reply & { readonly failure?: string }) => {
  const example = describeInput(text, 300)
  if (reply.failure !== undefined) return findings.add(`MCP: ${reply.failure === "hang" ? "hang" : "connection closed"}`, example)
  if (![200, 202, 400].includes(reply.status)) {
    return findings.add(`MCP: HTTP ${reply.status} (expected 200/202/400): ${describeInput(reply.text, 160)}`, example)
  }
  let parsed: unknown
  let parseable = true
  try {
    parsed = JSON.parse(text)
  } catch {
    parseable = false
  }
  // A member name repeated in one object is refused like malformed JSON (docs/API.md §12.1).
  if (parseable && findDuplicateMember(text) !== undefined) parseable = false
  const elements = parseable && Array.isArray(parsed) ? parsed : [parsed]
  const kinds = parseable ? elements.map(kindOf) : []
  const expectedAnswers = !parseable ? 1 : Array.isArray(parsed) && parsed.length === 0 ? 1
    : kinds.filter((k) => k === "request" || k === "invalid").length
  if (reply.status === 202) {
    if (expectedAnswers > 0) findings.add("MCP: 202 (no answer) although requests or invalid messages need one", example)
    if (reply.text.length > 0) findings.add("MCP: 202 with a body", example)
    return
  }
  if (expectedAnswers === 0) findings.add(`MCP: HTTP ${reply.status} with an answer to a body of only notifications/responses`, `${example} → ${describeInput(reply.text, 200)}`)
  if (!(reply.headers.get("content-type") ?? "").startsWith("application/json")) findings.add(`MCP: answer Content-Type ${reply.headers.get("content-type")}`, example)
  const body = reply.body
  if (body === undefined) return findings.add("MCP: answer is not JSON", `${example} → ${describeInput(reply.text, 200)}`)
  const batchAnswer = parseable && Array.isArray(parsed) && parsed.length > 0
  if (batchAnswer !== Array.isArray(body)) findings.add(`MCP: ${batchAnswer ? "batch answered with a single object" : "single message answered with an array"}`, example)
  const responses: Array<unknown> = Array.isArray(body) ? body : [body]
  for (const response of responses) {
    if (!isRecord(response) || response.jsonrpc !== "2.0" || !Object.hasOwn(response, "id") ||
      Object.hasOwn(response, "result") === Object.hasOwn(response, "error")) {
      findings.add("MCP: a response that is not a JSON-RPC 2.0 response object", `${example} → ${describeInput(response, 200)}`)
      continue
    }
    if (Object.hasOwn(response, "error")) {
      const error = response.error as Record<string, unknown>
      if (!isRecord(error) || !Number.isInteger(error.code) || typeof error.message !== "string") {
        findings.add("MCP: malformed error object", `${example} → ${describeInput(response, 200)}`)
      } else if (error.code === -32603) {
        findings.add("MCP: -32603 internal error", `${example} → ${describeInput(response, 300)}`)
      } else if (!allowedCodes.includes(error.code as number)) {
        findings.add(`MCP: error code ${error.code} outside {-32700,-32600,-32601,-32602,-32000}`, example)
      }
    }
  }
  if (!parseable) {
    const [only] = responses as Array<Record<string, any>>
    if (reply.status !== 400 || responses.length !== 1 || only?.id !== null || only?.error?.code !== -32700) {
      findings.add("MCP: unparseable JSON not answered 400 with one -32700 (id null)", `${example} → ${reply.status} ${describeInput(reply.text, 200)}`)
    }
    return
  }
  if (responses.length !== expectedAnswers) {
    findings.add(`MCP: ${responses.length} responses for ${expectedAnswers} requests/invalid messages (notifications must not be answered)`, `${example} → ${describeInput(reply.text, 300)}`)
  }
  // Every request's id is echoed unchanged (as a multiset: JSON-RPC lets batch answers come in any order).
  const answeredIds = responses.filter(isRecord).map((r) => JSON.stringify(r.id))
  for (const [i, element] of elements.entries()) {
    if (kinds[i] !== "request") continue
    const wanted = JSON.stringify((element as Record<string, unknown>).id)
    const at = answeredIds.indexOf(wanted)
    if (at === -1) findings.add("MCP: a request's id is not echoed unchanged", `${example} → ${describeInput(reply.text, 300)}`)
    else answeredIds.splice(at, 1)
  }
  if (!Array.isArray(parsed) && kinds[0] === "request" && reply.status !== 200) findings.add(`MCP: a valid request answered with HTTP ${reply.status}`, example)
  for (const response of responses.filter(isRecord)) {
    if (isRecord(response.result) && typeof (response.result as any).receipt_id === "string") storedByFuzz.add((response.result as any).receipt_id)
    const structured = isRecord(response.result) ? (response.result as any).structuredContent : undefined
    if (isRecord(structured) && typeof structured.receipt_id === "string" && structured.idempotent === false) storedByFuzz.add(structured.receipt_id)
  }
}

const postMcp = (text: string | Buffer) =>
  fetchReply("POST", "/api/v1/mcp", { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    typeof text === "string" ? Buffer.from(text, "utf8") : text)

const reportFindings = (findings: Findings, runs: number) => {
  expect(runs).toBeGreaterThan(0)
  expect(findings.summary(), `${findings.size} kind(s) of violation in ${runs} generated requests (${db})`).toEqual([])
}

describe(`HTTP fuzzing (${db})`, () => {
  describe("properties over generated requests", () => {
    it("request lines: random methods, targets, percent-encodings, long paths and query strings (raw sockets)", async () => {
      const findings = new Findings()
      const arb = fc.record({
        method: methodArb,
        target: targetArb(),
        version: versionArb,
        auth: fc.oneof({ weight: 3, arbitrary: fc.constant("key") }, { weight: 1, arbitrary: fc.constantFrom("none", "operator", "pv_live_garbage") }),
        withBody: fc.boolean()
      })
      const runs = await forAllSampled(arb, { seed: 0x5eed01, numRuns: 600 }, async (input) => {
        const wantsBody = input.withBody && ["POST", "PUT", "PATCH"].includes(input.method)
        const bytes = buildRequest(
          `${input.method} ${input.target} ${input.version}`.trimEnd(),
          [["Host", host()], ["Connection", "close"], ...headFor(input.auth), ...(wantsBody ? [["Content-Type", "application/json"] as const, ["Content-Length", "2"] as const] : [])],
          wantsBody ? "{}" : undefined
        )
        const reply = await rawRequest(server, bytes, { timeoutMs: TIMEOUT_MS, head: input.method === "HEAD" })
        checkExchange(findings, "request line", input, reply, { head: input.method === "HEAD", mcp: pathOf(input.target) === "/api/v1/mcp" })
      })
      reportFindings(findings, runs)
    })

    it("headers: duplicate Content-Length, bad Transfer-Encoding, huge and invalid headers, Expect, Content-Type variants (raw sockets)", async () => {
      const findings = new Findings()
      const arb = fc.record({ base: fc.nat({ max: baseRequests.length - 1 }), mutations: fc.array(mutationArb, { minLength: 1, maxLength: 3 }) })
      const runs = await forAllSampled(arb, { seed: 0x5eed02, numRuns: 450 }, async (input) => {
        const base = baseRequests[input.base]!
        const reply = await rawRequest(server, mutatedRequest(base, input.mutations), { timeoutMs: TIMEOUT_MS })
        checkExchange(findings, `${base.method} ${base.target()}`, input.mutations, reply, { mcp: base.target() === "/api/v1/mcp" })
        const receipt = reply.text.match(/"receipt_id":"(rr_[0-9A-Z]+)"/)
        if (receipt !== null && reply.status !== undefined && reply.status < 300 && base.target().includes("reliance-receipts")) storedByFuzz.add(receipt[1]!)
      })
      reportFindings(findings, runs)
    })

    it("REST bodies: random JSON, NUL and lone surrogates, hostile numbers, deep nesting, invalid UTF-8, +json media types", async () => {
      const findings = new Findings()
      const arb = fc.record({
        endpoint: fc.constantFrom<BodyEndpoint>("receipts", "actionability", "put-existing", "put-new", "api-keys"),
        auth: fc.oneof({ weight: 8, arbitrary: fc.constant("valid") }, { weight: 1, arbitrary: fc.constantFrom("none", "wrong") }),
        body: bodyKindArb,
        contentType: contentTypeArb
      })
      const runs = await forAllSampled(arb, { seed: 0x5eed03, numRuns: 450 }, async (input) => {
        const endpoint = bodyEndpoints[input.endpoint]
        const { bytes, pointer, expectMalformed } = bodyBytes(endpoint.template(), input.body)
        const headers: Record<string, string> = {}
        if (input.contentType !== "MISSING") headers["content-type"] = input.contentType
        if (input.auth === "valid") headers.authorization = `Bearer ${endpoint.auth === "key" ? key : server.operatorToken}`
        if (input.auth === "wrong") headers.authorization = `Bearer ${endpoint.auth === "key" ? server.operatorToken : key}`
        const reply = await fetchReply(endpoint.method, endpoint.path(), headers, bytes)
        const label = `${endpoint.method} ${endpoint.path()} [${input.contentType}, ${input.auth}]`
        const example = `${label}: ${describeInput(bytes.toString("latin1"), 300)}`
        checkFetch(findings, label, bytes.toString("latin1"), reply)
        if (reply.status === 0) return
        if (reply.status >= 200 && reply.status < 300) {
          if (typeof reply.body?.receipt_id === "string") storedByFuzz.add(reply.body.receipt_id)
          return findings.add(`${reply.status} accepted a body built to be invalid (${input.body.k})`, `${example} → ${describeInput(reply.text, 200)}`)
        }
        if (reply.status >= 500) return
        if (!isPlainJson(input.contentType)) {
          // docs/API.md §2: a POST/PUT whose Content-Type is not JSON (application/json) → 415.
          if (reply.status !== 415) findings.add(`Content-Type ${input.contentType} answered ${reply.status}, not 415`, example)
          else {
            const violation = problemViolation(reply, 415, "unsupported-media-type")
            if (violation !== undefined) findings.add(`415 not the documented problem: ${violation}`, example)
          }
          return
        }
        if (input.auth !== "valid") {
          if (![400, 401, 413, 422].includes(reply.status)) findings.add(`without a valid credential: ${reply.status} (expected 401, or a body-guard 400/413/422)`, example)
          return
        }
        if (expectMalformed) {
          const violation = problemViolation(reply, 400, "malformed-json")
          if (violation !== undefined) findings.add(`${input.body.k} body not answered 400 malformed-json (got ${reply.status} ${reply.body?.code})`, example)
          return
        }
        if (reply.status < 400) findings.add(`${input.body.k}: ${reply.status} instead of a 4xx problem`, example)
        if ((input.body.k === "unstorable" || input.body.k === "escapes") && reply.body?.code === "validation-failed") {
          const pointers: Array<string> = (reply.body.errors ?? []).map((e: { pointer: string }) => e.pointer)
          if (pointer !== undefined && !pointers.some((p) => p === pointer || p.startsWith(`${pointer}/`))) {
            findings.add(`${input.body.k}: 422 without a pointer to the spoiled field`, `${example} → pointers ${JSON.stringify(pointers)}, field ${pointer}`)
          }
        }
      })
      reportFindings(findings, runs)
    })

    it("JSON-RPC envelopes on /api/v1/mcp: random ids, methods, params, batches and notifications", async () => {
      const findings = new Findings()
      const runs = await forAllSampled(envelopeArb(), { seed: 0x5eed04, numRuns: 800 }, async (text) => {
        checkJsonRpc(findings, text, await postMcp(text))
      })
      reportFindings(findings, runs)
    })

    it("tool arguments with NUL or lone surrogates: JSON-RPC -32602", async () => {
      const findings = new Findings()
      const arb = fc.record({
        tool: fc.constantFrom(...toolNames),
        pick: fc.nat(),
        value: unstorableString,
        asKey: fc.boolean(),
        id: fc.oneof(fc.integer(), fc.string({ maxLength: 8 }))
      })
      const runs = await forAllSampled(arb, { seed: 0x5eed05, numRuns: 200 }, async (input) => {
        const template = toolArguments(input.tool, false)
        const strings = stringLeaves(template)
        const args = input.asKey || strings.length === 0
          ? { ...template, [input.value]: "x" }
          : setAt(template, strings[input.pick % strings.length]![0], input.value)
        const text = JSON.stringify({ jsonrpc: "2.0", id: input.id, method: "tools/call", params: { name: input.tool, arguments: args } })
        const reply = await postMcp(text)
        checkJsonRpc(findings, text, reply)
        const code = reply.body?.error?.code
        if (code !== -32602) {
          findings.add(`${input.tool}: ${reply.status} with ${code === undefined ? "no error" : `error ${code}`} (expected -32602)`, `${describeInput(text, 300)} → ${describeInput(reply.text, 200)}`)
        }
        if (typeof reply.body?.result?.structuredContent?.receipt_id === "string") storedByFuzz.add(reply.body.result.structuredContent.receipt_id)
      })
      reportFindings(findings, runs)
    })
  })

  describe("named cases", () => {
    /** Requests Node's HTTP parser refuses before the application sees them: the answer must still be problem+json. */
    const parserCases: ReadonlyArray<readonly [string, () => Buffer]> = [
      ["invalid method token", () => buildRequest("G ET /healthz HTTP/1.1", [["Host", host()], ["Connection", "close"]])],
      ["unknown method", () => buildRequest("BREW /healthz HTTP/1.1", [["Host", host()], ["Connection", "close"]])],
      ["garbage request line", () => Buffer.from("\u00ff\u00fe\u0000\r\n\r\n", "latin1")],
      ["bad HTTP version", () => buildRequest("GET /healthz HTTP/9.9", [["Host", host()], ["Connection", "close"]])],
      ["NUL in a header value", () => buildRequest("GET /healthz HTTP/1.1", [["Host", host()], "X-Bad: a\u0000b", ["Connection", "close"]])],
      ["space in a header name", () => buildRequest("GET /healthz HTTP/1.1", [["Host", host()], "X Bad: v", ["Connection", "close"]])],
      ["header line without a colon", () => buildRequest("GET /healthz HTTP/1.1", [["Host", host()], "NoColonHere", ["Connection", "close"]])],
      ["missing Host on HTTP/1.1", () => buildRequest("GET /healthz HTTP/1.1", [["Connection", "close"]])],
      ["header block over 16 KiB (431)", () => buildRequest("GET /healthz HTTP/1.1", [["Host", host()], ["X-Big", "v".repeat(17_000)], ["Connection", "close"]])],
      ["request target over 16 KiB (431)", () => buildRequest(`GET /api/v1/trust/${"A".repeat(17_000)}/human HTTP/1.1`, [["Host", host()], ["Connection", "close"]])],
      ["Expect: something (417)", () => buildRequest("GET /healthz HTTP/1.1", [["Host", host()], ["Expect", "something"], ["Connection", "close"]])],
      [
        "two different Content-Length values",
        () => buildRequest("POST /api/v1/actionability HTTP/1.1", [["Host", host()], ["Authorization", `Bearer ${key}`], ["Content-Type", "application/json"], ["Content-Length", "2"], ["Content-Length", "3"], ["Connection", "close"]], "{}")
      ],
      [
        "Content-Length and Transfer-Encoding together",
        () => buildRequest("POST /api/v1/actionability HTTP/1.1", [["Host", host()], ["Authorization", `Bearer ${key}`], ["Content-Type", "application/json"], ["Content-Length", "2"], ["Transfer-Encoding", "chunked"], ["Connection", "close"]], "2\r\n{}\r\n0\r\n\r\n")
      ],
      [
        "Transfer-Encoding that is not chunked",
        () => buildRequest("POST /api/v1/actionability HTTP/1.1", [["Host", host()], ["Authorization", `Bearer ${key}`], ["Content-Type", "application/json"], ["Transfer-Encoding", "gzip"], ["Connection", "close"]], "{}")
      ],
      ["negative Content-Length", () => buildRequest("POST /api/v1/actionability HTTP/1.1", [["Host", host()], ["Content-Type", "application/json"], ["Content-Length", "-1"], ["Connection", "close"]], "{}")],
      ["bad chunk size", () => buildRequest("POST /api/v1/actionability HTTP/1.1", [["Host", host()], ["Content-Type", "application/json"], ["Transfer-Encoding", "chunked"], ["Connection", "close"]], "zz\r\n{}\r\n0\r\n\r\n")]
    ]
    for (const [name, bytes] of parserCases) {
      it(`answers a request the HTTP parser refuses with problem+json: ${name}`, async () => {
        const reply = await rawRequest(server, bytes(), { timeoutMs: TIMEOUT_MS })
        expect(reply.timedOut, `no answer within ${TIMEOUT_MS} ms`).toBe(false)
        expect(reply.status, `the connection closed without an answer; received ${JSON.stringify(reply.raw)}`).toBeDefined()
        expect(reply.status! >= 400 && reply.status! < 500, reply.raw).toBe(true)
        expect(reply.headers.get("content-type") ?? "(no Content-Type)", `${reply.status} answer: ${JSON.stringify(reply.raw)}`).toMatch(/^application\/problem\+json/)
        const parsed = (() => {
          try {
            return JSON.parse(reply.text)
          } catch {
            return undefined
          }
        })()
        expectProblem({ status: reply.status!, headers: reply.headers, body: parsed, text: reply.text }, reply.status!, parsed?.code ?? "<problem code>")
      })
    }

    const bodyCases = () => [
      ["POST", "/api/v1/reliance-receipts", `Bearer ${key}`, JSON.stringify(receiptBody("fuzz:named"))],
      ["POST", "/api/v1/actionability", `Bearer ${key}`, JSON.stringify(receiptBody("fuzz:named"))],
      ["PUT", `/api/v1/determinations/${id}`, `Bearer ${server.operatorToken}`, JSON.stringify({ ...detBody, tier: "T4" })],
      ["POST", "/api/v1/api-keys", `Bearer ${server.operatorToken}`, JSON.stringify({ tenant_id: "tenant-fuzz-new", name: "n", scopes: ["trust:read"] })]
    ] as const

    for (const contentType of ["application/merge-patch+json", "application/vnd.api+json", "application/problem+json", "application/json-patch+json"]) {
      it(`refuses ${contentType} with 415 unsupported-media-type, promptly`, async () => {
        for (const [method, path, authorization, body] of bodyCases()) {
          const started = Date.now()
          const reply = await fetchReply(method, path, { authorization, "content-type": contentType }, Buffer.from(body))
          expect(reply.failure, `${method} ${path}: no answer within ${TIMEOUT_MS} ms`).toBeUndefined()
          expect(Date.now() - started, `${method} ${path} took too long`).toBeLessThan(3_000)
          expectProblem(reply, 415, "unsupported-media-type")
        }
        // MCP reads its own body: whatever it answers, it answers at once and never 5xx.
        const mcp = await fetchReply("POST", "/api/v1/mcp", { authorization: `Bearer ${key}`, "content-type": contentType }, Buffer.from("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"))
        expect(mcp.failure, "MCP: no answer").toBeUndefined()
        expect(mcp.status).toBeLessThan(500)
      })
    }

    it("answers invalid UTF-8 inside a JSON string with 400 malformed-json", async () => {
      for (const [method, path, authorization, body] of bodyCases()) {
        for (const bad of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82]]) {
          const at = body.indexOf("\"", body.indexOf(":") + 1) + 1
          const bytes = Buffer.concat([Buffer.from(body.slice(0, at)), Buffer.from(bad), Buffer.from(body.slice(at))])
          const reply = await fetchReply(method, path, { authorization, "content-type": "application/json" }, bytes)
          expect(reply.failure, `${method} ${path}`).toBeUndefined()
          expectProblem(reply, 400, "malformed-json")
        }
      }
    })

    it("refuses NUL and lone surrogates in REST bodies with 422 naming the field", async () => {
      const cases: ReadonlyArray<readonly [string, string, string, Record<string, unknown>, string]> = [
        ["POST", "/api/v1/reliance-receipts", key, { ...receiptBody("fuzz:nul"), principal: "al\u0000ice" }, "/principal"],
        ["POST", "/api/v1/reliance-receipts", key, { ...receiptBody("fuzz:nul"), organization: "Org\ud800" }, "/organization"],
        ["POST", "/api/v1/reliance-receipts", key, { ...receiptBody("fuzz:nul"), claim_scope: ["identity", "\udfff"] }, "/claim_scope/1"],
        ["POST", "/api/v1/actionability", key, { ...receiptBody("fuzz:nul"), purpose_id: "supplier\u0000" }, "/purpose_id"],
        ["PUT", `/api/v1/determinations/${id}`, "operator", { ...detBody, limitations: ["a\u0000"] }, "/limitations/0"],
        ["PUT", `/api/v1/determinations/${id}`, "operator", { ...detBody, subject: { ...detBody.subject, subject_id: "s\ud800" } }, "/subject/subject_id"],
        ["PUT", `/api/v1/determinations/${id}`, "operator", { ...detBody, purchase: { note: "x\u0000" } }, "/purchase/note"],
        ["PUT", `/api/v1/determinations/${id}`, "operator", { ...detBody, purchase: { "k\u0000": 1 } }, "/purchase"],
        ["POST", "/api/v1/api-keys", "operator", { tenant_id: "tenant-fuzz-new", name: "n\u0000", scopes: ["trust:read"] }, "/name"]
      ]
      for (const [method, path, bearer, body, pointer] of cases) {
        const reply = await request(server, method, path, { bearer: bearer === "operator" ? server.operatorToken : bearer, body })
        expectProblem(reply, 422, "validation-failed")
        const pointers: Array<string> = reply.body.errors.map((e: { pointer: string }) => e.pointer)
        expect(pointers.some((p) => p.startsWith(pointer)), `${method} ${path} ${pointer}: ${JSON.stringify(pointers)}`).toBe(true)
      }
    })

    it("answers hostile numbers in REST bodies with a 4xx problem, never 5xx", async () => {
      const texts = ["1e400", "9223372036854775808", "-9223372036854775809", "1.5", "18446744073709551616"]
      for (const text of texts) {
        const claims = JSON.stringify({ ...detBody, claims: [{ ...detBody.claims[0]!, value: PLACEHOLDER }] }).replace(`"${PLACEHOLDER}"`, text)
        const purchase = JSON.stringify({ ...detBody, purchase: { amount: PLACEHOLDER } }).replace(`"${PLACEHOLDER}"`, text)
        const limit = JSON.stringify({ tenant_id: "tenant-fuzz-new", name: "n", scopes: ["trust:read"], rate_limit_per_minute: PLACEHOLDER }).replace(`"${PLACEHOLDER}"`, text)
        for (const [method, path, rawBody] of [
          ["PUT", `/api/v1/determinations/${id}`, claims], ["PUT", `/api/v1/determinations/${id}`, purchase], ["POST", "/api/v1/api-keys", limit]
        ] as const) {
          const reply = await request(server, method, path, { ...asOperator(server), rawBody, headers: { "content-type": "application/json" } })
          expectProblem(reply, 422, "validation-failed")
        }
      }
    })

    it("answers tool arguments with NUL or lone surrogates with -32602 for every tool", async () => {
      for (const tool of toolNames) {
        for (const bad of ["a\u0000b", "\ud800"]) {
          const template = toolArguments(tool, false)
          const [pointer] = stringLeaves(template)[0]!
          const text = JSON.stringify({ jsonrpc: "2.0", id: `${tool}-1`, method: "tools/call", params: { name: tool, arguments: setAt(template, pointer, bad) } })
          const reply = await postMcp(text)
          expect(reply.status, `${tool} ${pointer}`).toBe(200)
          expect(reply.body, `${tool} ${pointer}: ${reply.text}`).toMatchObject({ jsonrpc: "2.0", id: `${tool}-1`, error: { code: -32602 } })
        }
      }
    })
  })

  describe("afterwards", () => {
    it("still answers normally, and the bad requests stored nothing", async () => {
      expect((await request(server, "GET", "/healthz")).status).toBe(200)
      expect((await request(server, "GET", "/readyz")).status).toBe(200)
      // Determinations unchanged: the same document, digest, ETag and event head.
      const human = await request(server, "GET", `/api/v1/trust/${id}/human`)
      expect(human.status).toBe(200)
      expect(human.body).toEqual(baseline.human)
      const machine = await request(server, "GET", `/api/v1/trust/${id}/machine`, { bearer: key })
      expect(machine.status).toBe(200)
      expect(machine.body.trust_state_digest).toBe(baseline.digest)
      expect(machine.headers.get("etag")).toBe(baseline.etag)
      const events = await request(server, "GET", `/api/v1/events?public_id=${id}`, { bearer: key })
      expect(events.body.head.sequence).toBe(baseline.head)
      expect(events.body.events).toHaveLength(baseline.head)
      expectProblem(await request(server, "GET", `/api/v1/trust/${neverId}/human`), 404, "determination-not-found")
      // No key was provisioned by a fuzzed body.
      const keys = await request(server, "GET", "/api/v1/api-keys?tenant_id=tenant-fuzz-new", asOperator(server))
      expect(keys.status).toBe(200)
      expect(keys.body.keys).toEqual([])
      // Receipts: the one created on purpose is unchanged and replays; fuzzed requests created none.
      const replay = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody("fuzz:setup") })
      expect(replay.status).toBe(200)
      expect(replay.body.receipt_id).toBe(receiptId)
      const stored = await request(server, "GET", `/api/v1/reliance-receipts/${receiptId}`, { bearer: key })
      const { idempotent: _, ...expected } = setupReceipt
      expect(stored.body).toEqual(expected)
      const fuzzReceipts = await Promise.all([...storedByFuzz].map(async (rid) =>
        `${rid}: GET ${(await request(server, "GET", `/api/v1/reliance-receipts/${rid}`, { bearer: key })).status}`))
      expect(fuzzReceipts, "receipts created by requests built to be invalid").toEqual([])
      // A fresh, valid receipt is still new (201): nothing of the fuzzed principals was stored under it.
      const fresh = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody("fuzz:body") })
      expect(fresh.status, fresh.text).toBe(201)
    })
  })
})
