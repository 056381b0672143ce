import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
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
  fc.constant(0),
  fc.double({ noNaN: true, noDefaultInfinity: true })
)
const method = fc.oneof(fc.constantFrom("ping", "tools/list", "tools/call", "fail", "die", "missing"), fc.string())
const params = fc.option(fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.array(fc.jsonValue())), { nil: undefined })

type Generated =
  | { readonly kind: "request"; readonly value: Record<string, unknown> }
  | { readonly kind: "notification"; readonly value: Record<string, unknown> }
  | { readonly kind: "response"; readonly value: Record<string, unknown> }
  | { readonly kind: "invalid"; readonly value: unknown }

const generatedRequest = fc.record({ id: requestId, method, params }).map(({ id, method, params }): Generated =>
  ({ kind: "request", value: { jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) } }))
const generatedNotification = fc.record({ method, params }).map(({ method, params }): Generated =>
  ({ kind: "notification", value: { jsonrpc: "2.0", method, ...(params === undefined ? {} : { params }) } }))
const generatedResponse = fc.record({ id: fc.oneof(requestId, fc.constant(null)), result: fc.jsonValue() }).map(({ id, result }): Generated =>
  ({ kind: "response", value: { jsonrpc: "2.0", id, result } }))
/** Values that can never be a message: no jsonrpc member, or not an object at all. */
const generatedInvalid = fc.oneof(
  fc.jsonValue().filter((v) => typeof v !== "object" || v === null || Array.isArray(v)),
  fc.dictionary(fc.string().filter((k) => k !== "jsonrpc" && k !== "id"), fc.jsonValue())
).map((value): Generated => ({ kind: "invalid", value }))

const message = fc.oneof(generatedRequest, generatedNotification, generatedResponse, generatedInvalid)

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

describe("JSON-RPC 2.0 codec: properties", () => {
  it.prop("never throws on any text, and always answers well-formed JSON-RPC or 202", [fc.oneof(fc.string(), fc.jsonValue().map((v) => JSON.stringify(v)))], ([body]) => {
    const reply = run(body)
    if (reply._tag === "Accepted") return
    const json = JSON.parse(reply.body)
    for (const response of Array.isArray(json) ? json : [json]) wellFormed(response)
  }, { fastCheck: { numRuns: 1000 } })

  it.prop("gives every request exactly one response with its id, and notifications none", [fc.array(message, { minLength: 1, maxLength: 12 })], ([messages]) => {
    // Distinct ids so each response can be matched to its request.
    const batch = messages.map((m, i) => (m.kind === "request" ? { ...m, value: { ...m.value, id: `${i}:${String(m.value.id)}` } } : m))
    const reply = run(JSON.stringify(batch.map((m) => m.value)))
    const expected = batch.filter((m) => m.kind === "request" || m.kind === "invalid")
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
      if (sent.kind === "request") expect(response.id).toStrictEqual((sent.value as { id: string }).id)
      else expect(response).toMatchObject({ id: null, error: { code: -32600 } })
    })
  }, { fastCheck: { numRuns: 500 } })

  it.prop("answers a single request with its id exactly and a single notification with 202", [message], ([m]) => {
    fc.pre(!Array.isArray(m.value)) // a top-level array is a batch, covered above
    const reply = run(JSON.stringify(m.value))
    switch (m.kind) {
      case "request": {
        expect(reply).toMatchObject({ _tag: "Answer", status: 200 })
        const json = replyJson(reply)
        wellFormed(json)
        expect(json.id).toStrictEqual(asSent((m.value as { id: unknown }).id))
        return
      }
      case "notification":
      case "response":
        expect(reply).toEqual({ _tag: "Accepted" })
        return
      case "invalid":
        expect(reply).toMatchObject({ _tag: "Answer", status: 400 })
        expect(replyJson(reply)).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } })
    }
  }, { fastCheck: { numRuns: 1000 } })

  it.prop("classifies any JSON value without throwing", [fc.jsonValue()], ([value]) => {
    const message = JsonRpc.classify(value)
    expect(["Request", "Notification", "ClientResponse", "Invalid"]).toContain(message._tag)
    if (message._tag === "Request") expect(JsonRpc.isRequestId(message.id)).toBe(true)
  }, { fastCheck: { numRuns: 1000 } })
})
