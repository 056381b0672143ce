import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Era from "../../src/mcp/Era.js"
import * as JsonRpc from "../../src/mcp/JsonRpc.js"

/** The pure rules of src/mcp/Era.ts: which revision a POST speaks, and the 2026-07-28 header and metadata checks. */

const Modern = "2026-07-28"
const meta = {
  "io.modelcontextprotocol/protocolVersion": Modern,
  "io.modelcontextprotocol/clientCapabilities": {}
}
const headersFor = (method: string, name?: string): Era.Headers =>
  ({ "mcp-protocol-version": Modern, "mcp-method": method, ...(name === undefined ? {} : { "mcp-name": name }) })

const routeOf = (body: unknown, headers: Era.Headers) => Era.route(JsonRpc.parse(JSON.stringify(body)), headers)

const refusal = (route: Era.Route) =>
  route._tag === "Refused" && "error" in route.response ? { status: route.status, code: route.response.error.code } : route._tag

const version = fc.oneof(
  fc.constantFrom(...Era.ServedProtocolVersions, "2024-11-05", "2099-01-01", ""),
  fc.stringMatching(/^[0-9]{4}-[0-9]{2}-[0-9]{2}$/)
)
const methodName = fc.constantFrom("server/discover", "tools/list", "tools/call", "initialize", "ping", "x/y")

describe("MCP eras: routing", () => {
  it("serves a request with no claim and no (or a 2025) version header as today", () => {
    for (const headers of [{}, { "mcp-protocol-version": "2025-11-25" }, { "mcp-protocol-version": "2025-03-26" }]) {
      expect(routeOf({ jsonrpc: "2.0", id: 1, method: "ping" }, headers)._tag).toBe("Legacy")
    }
  })

  it("routes a conforming 2026-07-28 request with what its client declared", () => {
    const routed = routeOf({
      jsonrpc: "2.0",
      id: "a",
      method: "tools/call",
      params: { name: "resolve_trust", _meta: { ...meta, "io.modelcontextprotocol/clientInfo": { name: "c", version: "1" } } }
    }, headersFor("tools/call", "resolve_trust"))
    expect(routed).toMatchObject({ _tag: "Modern", id: "a", method: "tools/call", meta: { protocolVersion: Modern, clientInfo: { name: "c", version: "1" } } })
  })

  it("answers any header/body version pair by the rule: equal and served → routed, unequal → -32020, not served → -32022", () => {
    fc.assert(fc.property(version, version, methodName, (header, claimed, method) => {
      const routed = routeOf({ jsonrpc: "2.0", id: 1, method, params: { _meta: { ...meta, "io.modelcontextprotocol/protocolVersion": claimed } } },
        { ...headersFor(method), "mcp-protocol-version": header })
      if (header !== claimed) expect(refusal(routed)).toEqual({ status: 400, code: -32020 })
      else if (!Era.isServedProtocolVersion(claimed)) expect(refusal(routed)).toEqual({ status: 400, code: -32022 })
      else if (Era.isSupportedProtocolVersion(claimed)) expect(routed._tag).toBe("Legacy")
      else expect(routed._tag).toBe("Modern")
    }))
  })

  it("refuses a 2026-07-28 request whose Mcp-Method or Mcp-Name differs from the body (-32020), whatever the values", () => {
    fc.assert(fc.property(fc.string(), fc.string({ minLength: 1 }), (bodyName, headerName) => {
      fc.pre(bodyName !== headerName && headerName !== "tools/call" && !headerName.startsWith("=?base64?") && headerName.trim() === headerName)
      const body = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: bodyName, _meta: meta } }
      expect(refusal(routeOf(body, headersFor("tools/call", headerName)))).toEqual({ status: 400, code: -32020 })
      expect(refusal(routeOf(body, headersFor(headerName, bodyName)))).toEqual({ status: 400, code: -32020 })
    }))
  })

  it("takes an Mcp-Name in the revision's Base64 sentinel encoding, for any name", () => {
    fc.assert(fc.property(fc.string({ unit: "grapheme" }), (name) => {
      const encoded = `=?base64?${Buffer.from(name, "utf8").toString("base64")}?=`
      expect(Era.decodeHeaderValue(encoded)).toBe(name)
      const body = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, _meta: meta } }
      expect(routeOf(body, headersFor("tools/call", encoded))._tag).toBe("Modern")
    }))
    // The revision's encoding examples.
    expect(Era.decodeHeaderValue("=?base64?SGVsbG8sIOS4lueVjA==?=")).toBe("Hello, 世界")
    expect(Era.decodeHeaderValue("=?base64?IHBhZGRlZCA=?=")).toBe(" padded ")
    expect(Era.decodeHeaderValue("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=")).toBe("=?base64?literal?=")
    expect(Era.decodeHeaderValue("us-west1")).toBe("us-west1")
    for (const broken of ["=?base64?abc?=", "=?base64?****?=", "=?base64?YQ==", "=?base64?/w==?="]) {
      expect(Era.decodeHeaderValue(broken), broken).toBeUndefined()
    }
  })

  it("drops a header value's surrounding spaces and tabs exactly as the RFC 9110 trim does, for any value", () =>
    fc.assert(fc.property(
      fc.string({ unit: fc.constantFrom(" ", "\t", "a", "=", "/", "é", "\n") }),
      fc.string(),
      (ows, value) => {
        for (const candidate of [value, ows + value, value + ows, ows + value + ows, ows]) {
          expect(Era.withoutOws(candidate)).toBe(candidate.replace(/^[ \t]+|[ \t]+$/g, ""))
        }
      }
    )))

  it("checks the 2026-07-28 metadata: clientCapabilities required, an object; clientInfo, when sent, names a version (-32602)", () => {
    const withMeta = (m: Record<string, unknown>) => routeOf({ jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: m } }, headersFor("tools/list"))
    expect(refusal(withMeta({ "io.modelcontextprotocol/protocolVersion": Modern }))).toEqual({ status: 400, code: -32602 })
    expect(refusal(withMeta({ ...meta, "io.modelcontextprotocol/clientCapabilities": [] }))).toEqual({ status: 400, code: -32602 })
    expect(refusal(withMeta({ ...meta, "io.modelcontextprotocol/clientInfo": { name: "x" } }))).toEqual({ status: 400, code: -32602 })
    expect(refusal(withMeta({ ...meta, "io.modelcontextprotocol/protocolVersion": null }))).toEqual({ status: 400, code: -32602 })
  })
})

describe("MCP eras: batches belong to 2025-03-26", () => {
  const batch = [{ jsonrpc: "2.0", id: 1, method: "ping" }, { jsonrpc: "2.0", method: "notifications/initialized" }]

  it("serves a batch only when the header names 2025-03-26 or nothing, for any header", () => {
    fc.assert(fc.property(fc.option(version, { nil: undefined }), (header) => {
      const routed = routeOf(batch, header === undefined ? {} : { "mcp-protocol-version": header })
      if (header === undefined || header === Era.BatchProtocolVersion) expect(routed._tag).toBe("Legacy")
      else if (!Era.isServedProtocolVersion(header)) expect(refusal(routed)).toEqual({ status: 400, code: -32022 })
      else expect(refusal(routed)).toEqual({ status: 400, code: -32600 })
    }))
  })

  it("refuses a batch holding a 2026-07-28 message, even without a header", () => {
    expect(refusal(routeOf([{ jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: meta } }], {}))).toEqual({ status: 400, code: -32600 })
    const legacyMeta = { "io.modelcontextprotocol/protocolVersion": "2025-03-26" }
    expect(routeOf([{ jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: legacyMeta } }], {})._tag).toBe("Legacy")
  })

  it("accepts a 2026-07-28 notification (202) unless its _meta and header disagree (-32020)", () => {
    const notification = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1, _meta: meta } }
    expect(routeOf(notification, {})._tag).toBe("ModernNotification")
    expect(routeOf({ jsonrpc: "2.0", method: "notifications/cancelled" }, { "mcp-protocol-version": Modern })._tag).toBe("ModernNotification")
    expect(refusal(routeOf(notification, { "mcp-protocol-version": "2025-11-25" }))).toEqual({ status: 400, code: -32020 })
  })
})

describe("JSON-RPC codec: repeated member names", () => {
  const answer = (text: string) => {
    const envelope = JsonRpc.parse(text)
    return envelope._tag === "Unparseable" ? envelope.duplicate : "parsed"
  }

  it("never flags a body JSON.stringify wrote (no object there repeats a name)", () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => {
      expect(answer(JSON.stringify(value))).toBe("parsed")
    }))
  })

  it("names the JSON pointer of a repeated member at any depth, escaped names included", () => {
    fc.assert(fc.property(fc.array(fc.string({ maxLength: 5 }), { minLength: 1, maxLength: 6 }), fc.string({ maxLength: 5 }), (path, key) => {
      // {"p0":{"p1":…{"key":1,"key":2}}}, built as text so the repetition survives.
      const inner = `{${JSON.stringify(key)}:1,${JSON.stringify(key)}:2}`
      const text = path.reduceRight((acc, segment) => `{${JSON.stringify(segment)}:${acc}}`, inner)
      const pointer = [...path, key].map((s) => "/" + s.replace(/~/g, "~0").replace(/\//g, "~1")).join("")
      expect(answer(text)).toBe(pointer)
    }))
    expect(answer('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":[0,{"b":1,"\\u0062":2}]}}')).toBe("/params/a/1/b")
  })

  it("answers it with -32700, id null, HTTP 400 and the pointer as data", () => {
    const reply = JsonRpc.unparseable({ duplicate: "/params/name" })
    expect(reply).toMatchObject({ _tag: "Answer", status: 400 })
    expect(JSON.parse((reply as { body: string }).body)).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: expect.stringContaining("\"/params/name\""), data: { pointer: "/params/name" } }
    })
  })
})
