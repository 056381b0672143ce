import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

let server: TestServer
let spec: any

beforeAll(async () => {
  server = await startTestServer()
  const reply = await request(server, "GET", "/openapi.json")
  expect(reply.status).toBe(200)
  spec = reply.body
})
afterAll(() => server?.close())

/** The REST surface issue 2 ships (contract section 4); later issues add more paths beside these. */
const foundationOperations: ReadonlyArray<readonly [string, string, "apiKey" | "operator" | "none"]> = [
  ["/api/v1/trust/{publicId}/machine", "get", "apiKey"],
  ["/api/v1/trust/{publicId}/human", "get", "none"],
  ["/api/v1/api-keys", "post", "operator"],
  ["/api/v1/api-keys", "get", "operator"],
  ["/api/v1/api-keys/{keyId}", "delete", "operator"],
  ["/api/v1/determinations/{publicId}", "put", "operator"],
  ["/healthz", "get", "none"],
  ["/readyz", "get", "none"]
]

const methods = ["get", "put", "post", "delete", "patch", "head", "options"]

/** Every operation of the document, with its path and method. */
const operations = (): Array<{ path: string; method: string; operation: any }> =>
  Object.entries<any>(spec.paths).flatMap(([path, item]) =>
    Object.entries<any>(item).filter(([method]) => methods.includes(method)).map(([method, operation]) => ({ path, method, operation })))

/** Resolve a local `$ref` against the whole OpenAPI document (OpenAPI 3.1: no $id, so the document is the base). */
const resolve = (ref: string): unknown => {
  if (!ref.startsWith("#/")) return undefined
  return ref.slice(2).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce<any>((node, key) => (node !== null && typeof node === "object" ? node[key] : undefined), spec)
}

const refsIn = (value: unknown, found: Set<string> = new Set()): Set<string> => {
  if (Array.isArray(value)) value.forEach((v) => refsIn(v, found))
  else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (k === "$ref" && typeof v === "string") found.add(v)
      else refsIn(v, found)
    }
  }
  return found
}

/** The schemes an operation accepts (an empty requirement object means "no credentials"). */
const schemesOf = (operation: any): Array<string> =>
  (operation.security ?? spec.security ?? []).flatMap((requirement: Record<string, unknown>) => Object.keys(requirement))

describe(`service documents (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("answers /healthz with 200", async () => {
    const reply = await request(server, "GET", "/healthz")
    expect(reply.status).toBe(200)
    expect(reply.headers.get("content-type")).toMatch(/^application\/json\b/)
    expect(reply.body).toEqual({ status: "ok" })
  })

  it("answers /readyz with 200 once the database is reachable and migrated", async () => {
    const reply = await request(server, "GET", "/readyz")
    expect(reply.status).toBe(200)
    expect(reply.body.status).toBe("ready")
  })

  it("serves an OpenAPI 3.1 document without credentials", async () => {
    const reply = await request(server, "GET", "/openapi.json")
    expect(reply.status).toBe(200)
    expect(reply.headers.get("content-type")).toMatch(/^application\/json\b/)
    expect(String(spec.openapi)).toMatch(/^3\.1\.\d+$/)
    expect(spec.info.title).toBeTypeOf("string")
    expect(spec.info.version).toBeTypeOf("string")
  })

  it("lists every REST path of the foundation with its method", () => {
    for (const [path, method] of foundationOperations) {
      expect(spec.paths[path], path).toBeDefined()
      expect(spec.paths[path][method], `${method.toUpperCase()} ${path}`).toBeDefined()
    }
  })

  it("documents the path parameters", () => {
    for (const [path, method] of foundationOperations) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1])
      const parameters = spec.paths[path][method].parameters ?? []
      for (const name of names) {
        expect(parameters.find((p: any) => p.name === name && p.in === "path" && p.required === true), `${path} ${name}`).toBeDefined()
      }
    }
  })

  it("has bearer security schemes, required exactly where the contract requires credentials", () => {
    const schemes = spec.components.securitySchemes as Record<string, any>
    expect(Object.values(schemes).some((s) => s.type === "http" && String(s.scheme).toLowerCase() === "bearer")).toBe(true)
    for (const [path, method, auth] of foundationOperations) {
      const used = schemesOf(spec.paths[path][method])
      if (auth === "none") {
        expect(used, `${method} ${path}`).toEqual([])
      } else {
        expect(used.length, `${method} ${path}`).toBeGreaterThan(0)
        for (const name of used) {
          expect(schemes[name], name).toMatchObject({ type: "http" })
          expect(String(schemes[name].scheme).toLowerCase()).toBe("bearer")
        }
      }
    }
    // API keys and the operator token are different credentials: no operation accepts both.
    const machine = schemesOf(spec.paths["/api/v1/trust/{publicId}/machine"].get)
    const operator = schemesOf(spec.paths["/api/v1/api-keys"].post)
    expect(machine.filter((s) => operator.includes(s))).toEqual([])
  })

  it("documents the errors each foundation operation answers", () => {
    const statuses = (path: string, method: string) => Object.keys(spec.paths[path][method].responses)
    expect(statuses("/api/v1/trust/{publicId}/machine", "get")).toEqual(expect.arrayContaining(["200", "400", "401", "403", "404"]))
    expect(statuses("/api/v1/trust/{publicId}/human", "get")).toEqual(expect.arrayContaining(["200", "400", "404"]))
    expect(statuses("/api/v1/api-keys", "post")).toEqual(expect.arrayContaining(["201", "401", "422"]))
    expect(statuses("/api/v1/api-keys", "get")).toEqual(expect.arrayContaining(["200", "401"]))
    expect(statuses("/api/v1/api-keys/{keyId}", "delete")).toEqual(expect.arrayContaining(["204", "401", "404"]))
    expect(statuses("/api/v1/determinations/{publicId}", "put")).toEqual(expect.arrayContaining(["200", "201", "400", "401", "422"]))
  })

  it("describes every error response as application/problem+json with the problem schema", () => {
    let errorResponses = 0
    for (const { path, method, operation } of operations()) {
      for (const [status, response] of Object.entries<any>(operation.responses ?? {})) {
        if (Number(status) < 400) continue
        errorResponses++
        const where = `${method.toUpperCase()} ${path} ${status}`
        expect(Object.keys(response.content ?? {}), where).toEqual(["application/problem+json"])
        const schema = response.content["application/problem+json"].schema
        const target: any = schema.$ref === undefined ? schema : resolve(schema.$ref)
        expect(target, where).toBeDefined()
      }
    }
    expect(errorResponses).toBeGreaterThan(10)
  })

  it("defines the problem schema with the contract's members", () => {
    const problem = resolve("#/components/schemas/ProblemDocument") as any
    expect(problem).toBeDefined()
    const body: any = problem.$ref !== undefined && problem.properties === undefined
      ? problem.$defs?.[problem.$ref.split("/").pop()] ?? resolve(problem.$ref)
      : problem
    expect(body.required).toEqual(expect.arrayContaining(["type", "title", "status", "detail", "code"]))
    expect(Object.keys(body.properties).sort()).toEqual(["code", "detail", "errors", "instance", "status", "title", "type"])
  })

  // Known bug (see report): src/http/OpenApiSpec.ts copies JSONSchema.make(ProblemDocument) into
  // components.schemas as is, so it keeps `$ref: "#/$defs/…"`, which OpenAPI 3.1 resolves against the
  // document root, where there is no $defs. Remove `.fails` once fixed.
  it("has no dangling $ref", () => {
    const dangling = [...refsIn(spec)].filter((ref) => resolve(ref) === undefined)
    expect(dangling).toEqual([])
  })

  it("describes success bodies as application/json", () => {
    const ok = spec.paths["/api/v1/trust/{publicId}/machine"].get.responses["200"]
    expect(Object.keys(ok.content)).toEqual(["application/json"])
    const schema: any = ok.content["application/json"].schema
    const trust: any = schema.$ref === undefined ? schema : resolve(schema.$ref)
    expect(trust.required).toEqual(expect.arrayContaining(["schema", "trust_state_digest", "freshness", "authority"]))
    const created = spec.paths["/api/v1/api-keys"].post.responses["201"]
    expect(Object.keys(created.content)).toEqual(["application/json"])
  })

  it("serves interactive docs as HTML", async () => {
    const reply = await request(server, "GET", "/docs")
    expect(reply.status).toBe(200)
    expect(reply.headers.get("content-type")).toMatch(/^text\/html\b/)
    expect(reply.text).toMatch(/<html/i)
    expect(reply.text).toContain("Trust Resolution and Reliance Receipt Service")
  })
})
