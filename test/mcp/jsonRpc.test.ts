import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import * as JsonRpc from "../../src/mcp/JsonRpc.js"

/** A handler that answers every request with what it was asked, and counts notifications. */
const echo = () => {
  const notified: Array<string> = []
  const handlers: JsonRpc.Handlers<never> = {
    request: (method, params) =>
      method === "fail"
        ? Effect.fail(new JsonRpc.RpcFailure({ code: -32000, message: "refused", data: { code: "forbidden" } }))
        : method === "die"
        ? Effect.die(new Error("secret internal detail at /srv/app.ts:12:3"))
        : method === "bigint"
        ? Effect.succeed({ n: 1n })
        : method === "missing"
        ? Effect.fail(JsonRpc.methodNotFound(method))
        : Effect.succeed({ method, params: params ?? null }),
    notification: (method) => Effect.sync(() => void notified.push(method))
  }
  return { handlers, notified }
}

const run = (body: string, handlers = echo().handlers) => Effect.runSync(JsonRpc.answer(body, handlers))

/** The reply's JSON body, or undefined for 202. */
const replyJson = (reply: JsonRpc.Reply): any => (reply._tag === "Accepted" ? undefined : JSON.parse(reply.body))

const request = (id: unknown, method = "ping", params?: unknown) =>
  ({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) })

describe("JSON-RPC 2.0 codec: whole bodies", () => {
  it("answers unparseable JSON with -32700, id null, HTTP 400", () => {
    for (const body of ["", "{", "{\"jsonrpc\": \"2.0\",", "not json", "[1,]", "\u0000"]) {
      const reply = run(body)
      expect(reply).toMatchObject({ _tag: "Answer", status: 400 })
      const json = replyJson(reply)
      expect(json).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.any(String) } })
    }
  })

  it("answers an empty batch with one -32600 (not an array), HTTP 400", () => {
    const reply = run("[]")
    expect(reply).toMatchObject({ _tag: "Answer", status: 400 })
    expect(replyJson(reply)).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.any(String) } })
  })

  it("answers a single value that is not a message with -32600 and HTTP 400", () => {
    for (const value of [1, "x", null, true, {}, { foo: "bar" }, { jsonrpc: "2.0" }]) {
      const reply = run(JSON.stringify(value))
      expect(reply).toMatchObject({ _tag: "Answer", status: 400 })
      expect(replyJson(reply)).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } })
    }
  })

  it("keeps the id it can read from an invalid request", () => {
    expect(replyJson(run(JSON.stringify({ jsonrpc: "1.0", id: 7, method: "ping" })))).toMatchObject({ id: 7, error: { code: -32600 } })
    expect(replyJson(run(JSON.stringify({ id: "a", method: "ping" })))).toMatchObject({ id: "a", error: { code: -32600 } })
    expect(replyJson(run(JSON.stringify({ jsonrpc: "2.0", id: 3, method: 1 })))).toMatchObject({ id: 3, error: { code: -32600 } })
    expect(replyJson(run(JSON.stringify({ jsonrpc: "2.0", id: 4, method: "ping", params: "x" })))).toMatchObject({ id: 4, error: { code: -32600 } })
    expect(replyJson(run(JSON.stringify({ jsonrpc: "2.0", id: 4, method: "ping", params: null })))).toMatchObject({ id: 4, error: { code: -32600 } })
  })

  it("refuses ids that are null, objects, arrays or booleans (MCP ids are strings or numbers)", () => {
    for (const id of [null, {}, [], true]) {
      expect(replyJson(run(JSON.stringify(request(id))))).toMatchObject({ id: null, error: { code: -32600 } })
    }
  })
})

describe("JSON-RPC 2.0 codec: requests and notifications", () => {
  it("echoes string and numeric ids exactly, 0 and \"0\" included", () => {
    for (const id of [0, "0", 1, -5, 2.5, "", "abc", 9007199254740991, "id with spaces"]) {
      const reply = run(JSON.stringify(request(id)))
      expect(reply).toMatchObject({ _tag: "Answer", status: 200 })
      const json = replyJson(reply)
      expect(json.id).toStrictEqual(id)
      expect(json).toEqual({ jsonrpc: "2.0", id, result: { method: "ping", params: null } })
    }
  })

  it("passes params (object or array) to the handler", () => {
    expect(replyJson(run(JSON.stringify(request(1, "m", { a: 1 }))))).toMatchObject({ result: { params: { a: 1 } } })
    expect(replyJson(run(JSON.stringify(request(1, "m", [1, 2]))))).toMatchObject({ result: { params: [1, 2] } })
  })

  it("never answers a notification (202), but delivers it", () => {
    const { handlers, notified } = echo()
    const reply = run(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }), handlers)
    expect(reply).toEqual({ _tag: "Accepted" })
    expect(notified).toEqual(["notifications/initialized"])
  })

  it("accepts a client's response without answering it", () => {
    expect(run(JSON.stringify({ jsonrpc: "2.0", id: 1, result: {} }))).toEqual({ _tag: "Accepted" })
    expect(run(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -1, message: "x" } }))).toEqual({ _tag: "Accepted" })
    // Both result and error is not a response.
    expect(replyJson(run(JSON.stringify({ jsonrpc: "2.0", id: 1, result: {}, error: {} })))).toMatchObject({ error: { code: -32600 } })
  })

  it("turns a handler's refusal into an error with its code and data", () => {
    expect(replyJson(run(JSON.stringify(request("x", "fail"))))).toEqual({
      jsonrpc: "2.0", id: "x", error: { code: -32000, message: "refused", data: { code: "forbidden" } }
    })
    expect(replyJson(run(JSON.stringify(request(2, "missing"))))).toEqual({
      jsonrpc: "2.0", id: 2, error: { code: -32601, message: "Method not found: missing" }
    })
  })

  it("turns a defect into -32603 without any internal detail", () => {
    const reply = run(JSON.stringify(request(9, "die")))
    expect(reply).toMatchObject({ _tag: "Answer", status: 200 })
    expect(replyJson(reply)).toEqual({ jsonrpc: "2.0", id: 9, error: { code: -32603, message: "Internal error." } })
    expect((reply as { body: string }).body).not.toMatch(/secret|srv|app\.ts/)
  })

  it("turns an unserializable result into -32603 for that id", () => {
    expect(replyJson(run(JSON.stringify(request(3, "bigint"))))).toEqual({ jsonrpc: "2.0", id: 3, error: { code: -32603, message: "Internal error." } })
  })
})

describe("JSON-RPC 2.0 codec: batches", () => {
  it("answers each request of a batch in order, skips notifications and client responses", () => {
    const body = JSON.stringify([
      request(1, "a"),
      { jsonrpc: "2.0", method: "note" },
      request("two", "fail"),
      { jsonrpc: "2.0", id: 5, result: "client reply" },
      42,
      request(0, "c")
    ])
    const reply = run(body)
    expect(reply).toMatchObject({ _tag: "Answer", status: 200 })
    const json = replyJson(reply)
    expect(Array.isArray(json)).toBe(true)
    expect(json.map((r: any) => r.id)).toEqual([1, "two", null, 0])
    expect(json[1].error.code).toBe(-32000)
    expect(json[2].error.code).toBe(-32600)
    expect(json[3].result.method).toBe("c")
  })

  it("answers a batch of only notifications and responses with 202 and nothing else", () => {
    const { handlers, notified } = echo()
    const reply = run(JSON.stringify([
      { jsonrpc: "2.0", method: "n1" },
      { jsonrpc: "2.0", id: 1, result: null },
      { jsonrpc: "2.0", method: "n2", params: {} }
    ]), handlers)
    expect(reply).toEqual({ _tag: "Accepted" })
    expect(notified).toEqual(["n1", "n2"])
  })

  it("answers a batch of invalid values with one error each", () => {
    const json = replyJson(run("[1,2,3]"))
    expect(json).toHaveLength(3)
    for (const response of json) expect(response).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } })
  })
})

describe("JSON-RPC 2.0 codec: limits", () => {
  const limits: JsonRpc.Limits = { refuse: (m) => (JSON.stringify(m).length > 60 ? "too big" : undefined) }

  it("refuses a flagged message as an invalid request, keeping its id", () => {
    const reply = Effect.runSync(JsonRpc.answer(JSON.stringify(request(5, "m", { padding: "x".repeat(80) })), echo().handlers, limits))
    expect(reply).toMatchObject({ _tag: "Answer", status: 400 })
    expect(replyJson(reply)).toEqual({ jsonrpc: "2.0", id: 5, error: { code: -32600, message: "Invalid Request: too big" } })
  })

  it("refuses only the flagged message of a batch", () => {
    const body = JSON.stringify([request(1), request(2, "m", { padding: "x".repeat(80) })])
    const json = replyJson(Effect.runSync(JsonRpc.answer(body, echo().handlers, limits)))
    expect(json.map((r: any) => [r.id, r.error?.code ?? "ok"])).toEqual([[1, "ok"], [2, -32600]])
  })
})

// ---- Properties ----

const requestId = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.constantFrom(0, -0, "0", "", 9007199254740991, 1e21, -2.5),
  fc.double({ noNaN: true, noDefaultInfinity: true })
)
const method = fc.oneof(fc.constantFrom("ping", "tools/list", "tools/call", "fail", "die", "missing"), fc.string())
const params = fc.option(fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.array(fc.jsonValue())), { nil: undefined })

/** What the codec must make of a generated value, stated by the generator (not computed by the codec). */
type Expected =
  | { readonly tag: "Request"; readonly id: unknown }
  | { readonly tag: "Notification" }
  | { readonly tag: "ClientResponse" }
  /** Answered -32600 with the id it could read (a string or a finite number), else null. */
  | { readonly tag: "Invalid"; readonly id: unknown }

interface Case {
  /** Which generator made it, for the coverage check. */
  readonly label: string
  readonly value: unknown
  readonly expected: Expected
}

/** An object with its members in a generated order (member order must never matter). */
const shuffled = (members: Record<string, unknown>): fc.Arbitrary<Record<string, unknown>> => {
  const present = Object.keys(members).filter((k) => members[k] !== undefined)
  return fc.shuffledSubarray(present, { minLength: present.length, maxLength: present.length })
    .map((order) => Object.fromEntries(order.map((k) => [k, members[k]])))
}

const caseOf = (label: string, members: Record<string, unknown>, expected: Expected): fc.Arbitrary<Case> =>
  shuffled(members).map((value) => ({ label, value, expected }))

/** Anything but the exact string "2.0": near misses first. */
const wrongVersion = fc.oneof(
  fc.constantFrom("1.0", "2", "2.00", " 2.0", "2.0 ", "2.0\u0000", "", 2, 2.0, 20, null, true, ["2.0"], { version: "2.0" }),
  fc.string().filter((s) => s !== "2.0")
)
/** Ids MCP refuses (JSON-RPC allows null; objects, arrays and booleans are never ids). */
const wrongId = fc.constantFrom(null, true, false, {}, [], { id: 1 }, [1], ["a"])
const wrongMethod = fc.oneof(fc.integer(), fc.constantFrom(null, true, false), fc.array(fc.string(), { maxLength: 2 }), fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }))
const wrongParams = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null))
const result = fc.jsonValue({ maxDepth: 2 })
const errorObject = fc.record({ code: fc.integer(), message: fc.string() })

const validCases: ReadonlyArray<fc.Arbitrary<Case>> = [
  fc.tuple(requestId, method, params).chain(([id, m, p]) =>
    caseOf("request", { jsonrpc: "2.0", id, method: m, params: p }, { tag: "Request", id })),
  fc.tuple(method, params).chain(([m, p]) =>
    caseOf("notification", { jsonrpc: "2.0", method: m, params: p }, { tag: "Notification" })),
  fc.tuple(fc.oneof(requestId, fc.constant(null)), fc.oneof(result.map((r) => ({ result: r })), errorObject.map((e) => ({ error: e }))))
    .chain(([id, outcome]) => caseOf("response", { jsonrpc: "2.0", id, ...outcome }, { tag: "ClientResponse" }))
]

/** One thing wrong with an otherwise valid message: what a careless client sends. */
const nearValidCases: ReadonlyArray<fc.Arbitrary<Case>> = [
  fc.tuple(requestId, method, params, fc.option(wrongVersion, { nil: undefined })).chain(([id, m, p, v]) =>
    caseOf("request, jsonrpc wrong or missing", { jsonrpc: v, id, method: m, params: p }, { tag: "Invalid", id })),
  fc.tuple(method, fc.option(wrongVersion, { nil: undefined })).chain(([m, v]) =>
    caseOf("notification, jsonrpc wrong or missing", { jsonrpc: v, method: m }, { tag: "Invalid", id: null })),
  fc.tuple(requestId, wrongMethod, params).chain(([id, m, p]) =>
    caseOf("request, method not a string", { jsonrpc: "2.0", id, method: m, params: p }, { tag: "Invalid", id })),
  fc.tuple(wrongMethod, params).chain(([m, p]) =>
    caseOf("notification, method not a string", { jsonrpc: "2.0", method: m, params: p }, { tag: "Invalid", id: null })),
  fc.tuple(requestId, method, wrongParams).chain(([id, m, p]) =>
    caseOf("request, params not structured", { jsonrpc: "2.0", id, method: m, params: p }, { tag: "Invalid", id })),
  fc.tuple(method, wrongParams).chain(([m, p]) =>
    caseOf("notification, params not structured", { jsonrpc: "2.0", method: m, params: p }, { tag: "Invalid", id: null })),
  fc.tuple(wrongId, method, params).chain(([id, m, p]) =>
    caseOf("request, id not a string or number", { jsonrpc: "2.0", id, method: m, params: p }, { tag: "Invalid", id: null })),
  fc.tuple(fc.oneof(requestId, fc.constant(null)), result, errorObject).chain(([id, r, e]) =>
    caseOf("response with result and error", { jsonrpc: "2.0", id, result: r, error: e }, { tag: "Invalid", id: id === null ? null : id })),
  fc.tuple(requestId).chain(([id]) =>
    caseOf("response with neither result nor error", { jsonrpc: "2.0", id }, { tag: "Invalid", id })),
  result.chain((r) => caseOf("response without id", { jsonrpc: "2.0", result: r }, { tag: "Invalid", id: null })),
  fc.tuple(wrongId.filter((id) => id !== null), result).chain(([id, r]) =>
    caseOf("response, id not a string, number or null", { jsonrpc: "2.0", id, result: r }, { tag: "Invalid", id: null })),
  fc.tuple(requestId, result, fc.option(wrongVersion, { nil: undefined })).chain(([id, r, v]) =>
    caseOf("response, jsonrpc wrong or missing", { jsonrpc: v, id, result: r }, { tag: "Invalid", id }))
]

/** Values that can never be a message: not an object at all, or an object with none of the members. */
const notAMessage: fc.Arbitrary<Case> = fc.oneof(
  fc.jsonValue().filter((v) => typeof v !== "object" || v === null || Array.isArray(v)),
  fc.dictionary(fc.string().filter((k) => !["jsonrpc", "id", "method", "result", "error"].includes(k)), fc.jsonValue())
).map((value) => ({ label: "not a message", value, expected: { tag: "Invalid", id: null } }))

const message: fc.Arbitrary<Case> = fc.oneof(
  { weight: 3, arbitrary: fc.oneof(...validCases) },
  { weight: 4, arbitrary: fc.oneof(...nearValidCases) },
  { weight: 1, arbitrary: notAMessage }
)

/** The id a JSON text round trip gives (what the server reads), e.g. -0 → 0. */
const asSent = (id: unknown) => JSON.parse(JSON.stringify(id))

const wellFormed = (response: any) => {
  expect(response.jsonrpc).toBe("2.0")
  expect("id" in response).toBe(true)
  expect(("result" in response) !== ("error" in response)).toBe(true)
  if ("error" in response) {
    expect(Number.isInteger(response.error.code)).toBe(true)
    expect(typeof response.error.message).toBe("string")
  }
}

/** Bodies a client could send: arbitrary text, JSON, messages and batches, and valid bodies cut short. */
const body = fc.oneof(
  fc.string(),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  message.map((m) => JSON.stringify(m.value)),
  fc.array(message, { minLength: 1, maxLength: 8 }).map((ms) => JSON.stringify(ms.map((m) => m.value))),
  fc.tuple(message, fc.nat()).map(([m, n]) => {
    const text = JSON.stringify(m.value)
    return text.slice(0, n % text.length)
  })
)

describe("JSON-RPC 2.0 codec: properties", () => {
  it("generates valid, near-valid and invalid messages of every kind (fixed seed)", () => {
    const sample = fc.sample(message, { numRuns: 3_000, seed: 20_250_611 })
    const labels = new Set(sample.map((m) => m.label))
    expect(labels.size).toBe(validCases.length + nearValidCases.length + 1)
    const tags = new Set(sample.map((m) => m.expected.tag))
    expect([...tags].sort()).toEqual(["ClientResponse", "Invalid", "Notification", "Request"])
    // The invalid ones include some whose id can be read back, and some that are refused with id null.
    expect(sample.some((m) => m.expected.tag === "Invalid" && m.expected.id !== null)).toBe(true)
    expect(sample.some((m) => m.expected.tag === "Invalid" && m.expected.id === null && typeof m.value === "object")).toBe(true)
  })

  it("never throws on any text, and always answers well-formed JSON-RPC or 202", () => fc.assert(fc.property(body, (text) => {
    const reply = run(text)
    if (reply._tag === "Accepted") return
    const json = JSON.parse(reply.body)
    for (const response of Array.isArray(json) ? json : [json]) wellFormed(response)
  }), { numRuns: 2000 }))

  it("classifies valid and near-valid messages as the generator says, and any JSON value without throwing", () => fc.assert(fc.property(
    fc.oneof(message, fc.jsonValue().map((value): Case => ({ label: "json", value, expected: { tag: "Invalid", id: null } }))), (m) => {
    const classified = JsonRpc.classify(m.value)
    expect(["Request", "Notification", "ClientResponse", "Invalid"]).toContain(classified._tag)
    if (classified._tag === "Request") expect(JsonRpc.isRequestId(classified.id)).toBe(true)
    if (m.label === "json") return // arbitrary JSON: only totality is claimed
    expect(classified._tag, JSON.stringify(m.value)).toBe(m.expected.tag)
    if (classified._tag === "Request" || classified._tag === "Invalid") {
      expect(classified.id).toBe((m.expected as { id: unknown }).id)
    }
    if (classified._tag === "Request" || classified._tag === "Notification") {
      expect(classified.method).toBe((m.value as { method: unknown }).method)
      expect(classified.params).toBe((m.value as { params?: unknown }).params)
    }
  }), { numRuns: 2000 }))

  it("gives every request and invalid message exactly one response, in order, and notifications none", () => fc.assert(fc.property(
    fc.array(message, { minLength: 1, maxLength: 12 }), (messages) => {
    // Distinct ids so each response can be matched to its request.
    const batch = messages.map((m, i) =>
      m.expected.tag === "Request"
        ? { ...m, value: { ...(m.value as object), id: `${i}:${String(m.expected.id)}` }, expected: { tag: "Request" as const, id: `${i}:${String(m.expected.id)}` } }
        : m)
    const reply = run(JSON.stringify(batch.map((m) => m.value)))
    const expected = batch.filter((m) => m.expected.tag === "Request" || m.expected.tag === "Invalid")
    if (expected.length === 0) {
      expect(reply).toEqual({ _tag: "Accepted" })
      return
    }
    expect(reply).toMatchObject({ _tag: "Answer", status: 200 })
    const json = replyJson(reply)
    expect(Array.isArray(json)).toBe(true)
    expect(json).toHaveLength(expected.length)
    json.forEach((response: any, i: number) => {
      wellFormed(response)
      const sent = expected[i]!
      const id = asSent((sent.expected as { id: unknown }).id)
      expect(response.id).toStrictEqual(id)
      if (sent.expected.tag === "Invalid") expect(response.error.code).toBe(-32600)
    })
  }), { numRuns: 500 }))

  it("answers a single message: a request 200 with its id, a notification or response 202, anything else 400", () => fc.assert(fc.property(message, (m) => {
    fc.pre(!Array.isArray(m.value)) // a top-level array is a batch, covered above
    const reply = run(JSON.stringify(m.value))
    switch (m.expected.tag) {
      case "Request": {
        expect(reply).toMatchObject({ _tag: "Answer", status: 200 })
        const json = replyJson(reply)
        wellFormed(json)
        expect(json.id).toStrictEqual(asSent(m.expected.id))
        return
      }
      case "Notification":
      case "ClientResponse":
        expect(reply).toEqual({ _tag: "Accepted" })
        return
      case "Invalid":
        expect(reply).toMatchObject({ _tag: "Answer", status: 400 })
        expect(replyJson(reply)).toEqual({
          jsonrpc: "2.0", id: asSent(m.expected.id), error: { code: -32600, message: expect.stringMatching(/^Invalid Request: /) }
        })
    }
  }), { numRuns: 2000 }))
})

describe("JSON-RPC 2.0 codec: pre-encoded results", () => {
  // A tool result is spliced into the envelope as the text it was encoded to once; the envelope around it is
  // written directly. It must be the envelope the declared schema writes, for every id a request can carry.
  it("writes the same response as the schema-encoded one, for every request id and JSON result", () =>
    fc.assert(fc.property(
      fc.oneof(fc.string(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer()),
      fc.jsonValue(),
      (id, result) => {
        const direct = JsonRpc.encodeResponse(JsonRpc.success(id, new JsonRpc.PreEncoded(JSON.stringify(result))))
        const viaSchema = JsonRpc.encodeResponse(JsonRpc.success(id, result))
        expect(direct).toBe(viaSchema)
        expect(JSON.parse(direct)).toEqual({ jsonrpc: "2.0", id: JSON.parse(JSON.stringify(id)), result: JSON.parse(JSON.stringify(result)) })
      }
    ), { numRuns: 2000 }))
})
