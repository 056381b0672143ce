import { readFileSync } from "node:fs"
import { Context } from "effect"
import { OpenApi } from "effect/http-api"
import { describe, expect, it } from "vitest"
import { AnyKey, requiredScopes } from "../../src/api/Auth.js"
import { Api } from "../../src/app/Api.js"
import { Scopes } from "../../src/domain/ApiKey.js"
import { renderScopeMatrix, scopedEndpoints } from "../support/authz/scopeMatrix.js"

/**
 * Issue 20: an endpoint's scope is declared once, as its `RequiredScope` annotation. These checks hold the
 * definition to that (every API-key endpoint has one, no other endpoint has one, no summary spells a scope
 * by hand) and the documentation to the definition (the docs/API.md §3.2 table is the rendered matrix).
 * That ApiKeyAuth enforces the annotation over HTTP is test/http/authorization.http.test.ts.
 */
describe("endpoint scopes (the RequiredScope annotation)", () => {
  const endpoints = scopedEndpoints()

  it("walks a non-trivial definition", () => {
    expect(endpoints.length).toBeGreaterThanOrEqual(25)
    expect(endpoints.filter((e) => e.apiKey).length).toBeGreaterThanOrEqual(15)
  })

  it("gives every endpoint behind ApiKeyAuth a scope (or AnyKey), and no other endpoint one", () => {
    const known = new Set<string>([...Scopes, AnyKey])
    const wrong = endpoints.flatMap(({ endpoint, apiKey, scope }) => {
      const name = `${endpoint.method} ${endpoint.path}`
      if (apiKey && scope === undefined) return [`${name}: behind ApiKeyAuth without a RequiredScope`]
      if (apiKey && !known.has(scope!)) return [`${name}: unknown scope ${scope}`]
      if (!apiKey && scope !== undefined) return [`${name}: a RequiredScope (${scope}) without ApiKeyAuth`]
      return []
    })
    expect(wrong).toEqual([])
    // The server's reading of the definition agrees (it refuses to start otherwise).
    const served = new Map(requiredScopes(Api).map((e) => [e.endpoint, e.scope]))
    for (const e of endpoints) expect(served.get(e.endpoint), `${e.endpoint.method} ${e.endpoint.path}`).toBe(e.scope)
  })

  it("writes no scope or credential into a summary by hand (the OpenAPI document adds it from the annotation)", () => {
    const handWritten = endpoints.flatMap(({ endpoint }) => {
      const summary = Context.getOrUndefined(endpoint.annotations, OpenApi.Summary) ?? ""
      return /\bscope\b|:read|:write|mcp:call|any API key|\(operator\)/i.test(summary) ? [`${endpoint.method} ${endpoint.path}: ${summary}`] : []
    })
    expect(handWritten).toEqual([])
  })

  it("documents in docs/API.md §3.2 exactly the matrix the annotations and the MCP tools' scopes give", () => {
    const doc = readFileSync(new URL("../../docs/API.md", import.meta.url), "utf8")
    const begin = doc.indexOf("<!-- scope matrix:")
    const end = doc.indexOf("<!-- end of scope matrix -->")
    expect(begin, "the scope matrix markers in docs/API.md").toBeGreaterThan(0)
    const documented = doc.slice(doc.indexOf("\n", begin) + 1, end).trim()
    expect(documented, `docs/API.md §3.2 must read:\n${renderScopeMatrix()}`).toBe(renderScopeMatrix())
  })
})
