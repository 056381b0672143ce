import { describe, expect, it } from "@effect/vitest"
import { Option } from "effect"
import * as fc from "fast-check"
import {
  acceptsJson,
  LatestProtocolVersion,
  negotiateProtocolVersion,
  SupportedProtocolVersions,
  transportProblem
} from "../../src/mcp/Mcp.js"

const sdkHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }

const refusal = (headers: Record<string, string | undefined>) =>
  Option.map(transportProblem(headers), (problem) => problem._tag).pipe(Option.getOrNull)

describe("Streamable HTTP transport rules", () => {
  it("serves what the MCP SDK client sends", () => {
    expect(refusal(sdkHeaders)).toBeNull()
    for (const version of SupportedProtocolVersions) expect(refusal({ ...sdkHeaders, "mcp-protocol-version": version })).toBeNull()
  })

  it("refuses a body that is not JSON with 415", () => {
    for (const contentType of [undefined, "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "application/jsonx"]) {
      expect(refusal({ ...sdkHeaders, "content-type": contentType }), String(contentType)).toBe("UnsupportedMediaType")
    }
    for (const contentType of ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON"]) {
      expect(refusal({ ...sdkHeaders, "content-type": contentType }), contentType).toBeNull()
    }
  })

  it("refuses an Accept header that rules out application/json with 406", () => {
    for (const accept of ["text/event-stream", "text/html", "application/xml", "application/json;q=0", "application/json;q=0, */*"]) {
      expect(acceptsJson(accept), accept).toBe(false)
      expect(refusal({ ...sdkHeaders, accept }), accept).toBe("NotAcceptable")
    }
    for (const accept of [undefined, "", "application/json", "*/*", "application/*", "text/event-stream, application/json;q=0.5", "text/html, */*;q=0.1"]) {
      expect(acceptsJson(accept), String(accept)).toBe(true)
    }
  })

  it("leaves the protocol version to the JSON-RPC layer (-32022 for the request's id, test/mcp/era.test.ts)", () => {
    expect(refusal({ ...sdkHeaders, "mcp-protocol-version": "2024-11-05" })).toBeNull()
    expect(refusal({ "content-type": "text/plain", accept: "text/html", "mcp-protocol-version": "x" })).toBe("UnsupportedMediaType")
  })

  it("negotiates: the client's version when supported, else the newest", () => {
    for (const version of SupportedProtocolVersions) expect(negotiateProtocolVersion(version)).toBe(version)
    expect(LatestProtocolVersion).toBe("2025-11-25")
  })

  it("answers any other requested version with the newest", () => fc.assert(fc.property(fc.jsonValue(), (requested) => {
    fc.pre(!(SupportedProtocolVersions as ReadonlyArray<unknown>).includes(requested))
    expect(negotiateProtocolVersion(requested)).toBe(LatestProtocolVersion)
  })))
})
