import { Layer } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { HttpApiScalar } from "effect/http-api"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AnyKey } from "../../src/api/Auth.js"
import { Api } from "../../src/app/Api.js"
import { definedEndpoints, endpointKey } from "../support/authz/endpoints.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { isolatedConfig } from "../support/testConfig.js"

let server: TestServer
let spec: any
const publicId = "DET-V1-OPENAPI-0001"

beforeAll(async () => {
  server = await startTestServer({ config: isolatedConfig() })
  const reply = await request(server, "GET", "/openapi.json")
  expect(reply.status).toBe(200)
  spec = reply.body
  expect((await putDetermination(server, publicId, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
})
afterAll(() => server?.close())

/** The REST surface issue 2 ships (docs/API.md §7); later issues add more paths beside these. */
const foundationOperations: ReadonlyArray<readonly [string, string, "apiKey" | "operator" | "none"]> = [
  ["/api/v1/trust/{publicId}/machine", "get", "apiKey"],
  ["/api/v1/trust/{publicId}/human", "get", "none"],
  ["/api/v1/api-keys", "post", "operator"],
  ["/api/v1/api-keys", "get", "operator"],
  ["/api/v1/api-keys/{keyId}", "delete", "operator"],
  ["/api/v1/determinations/{publicId}", "put", "operator"],
  ["/healthz", "get", "none"],
  ["/readyz", "get", "none"],
  ["/api/v1/events", "get", "apiKey"],
  ["/api/v1/events/keys", "get", "none"]
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

/**
 * Does `value` conform to `schema`? The JSON Schema keywords the document uses (type, enum, required,
 * properties, additionalProperties, items, anyOf, pattern, local $ref); returns every violation with its path.
 */
const violations = (value: unknown, schema: any, at = ""): Array<string> => {
  if (schema === undefined || schema === true || (typeof schema === "object" && Object.keys(schema).length === 0)) return []
  if (typeof schema.$ref === "string") {
    const target = resolve(schema.$ref)
    return target === undefined ? [`${at}: dangling ${schema.$ref}`] : violations(value, target, at)
  }
  if (Array.isArray(schema.anyOf)) {
    const each = schema.anyOf.map((s: unknown) => violations(value, s, at))
    return each.some((v: Array<string>) => v.length === 0) ? [] : [`${at}: matches no anyOf branch (${each.flat().join("; ")})`]
  }
  const out: Array<string> = []
  if (schema.enum !== undefined && !schema.enum.some((e: unknown) => JSON.stringify(e) === JSON.stringify(value))) {
    out.push(`${at}: ${JSON.stringify(value)} not in ${JSON.stringify(schema.enum)}`)
  }
  const typeOf = (v: unknown) =>
    v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v
  const types: Array<string> | undefined = schema.type === undefined ? undefined : [].concat(schema.type)
  if (types !== undefined && !types.some((t) => t === typeOf(value) || (t === "number" && typeOf(value) === "integer"))) {
    return [...out, `${at}: ${typeOf(value)} is not ${types.join(" | ")}`]
  }
  if (typeof value === "string" && typeof schema.pattern === "string" && !new RegExp(schema.pattern, "u").test(value)) {
    out.push(`${at}: ${JSON.stringify(value)} does not match ${schema.pattern}`)
  }
  if (Array.isArray(value) && schema.items !== undefined) {
    value.forEach((item, i) => out.push(...violations(item, schema.items, `${at}/${i}`)))
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const record = value as Record<string, unknown>
    for (const name of schema.required ?? []) if (!(name in record)) out.push(`${at}/${name}: required, missing`)
    for (const [name, member] of Object.entries(record)) {
      const declared = schema.properties?.[name]
      if (declared !== undefined) out.push(...violations(member, declared, `${at}/${name}`))
      else if (schema.additionalProperties === false) out.push(`${at}/${name}: not allowed`)
      else if (typeof schema.additionalProperties === "object") out.push(...violations(member, schema.additionalProperties, `${at}/${name}`))
    }
  }
  return out
}

/** The documented schema of one response: `status` of `METHOD path`, in `mediaType`. */
const responseSchema = (path: string, method: string, status: string, mediaType: string): any => {
  const response = spec.paths[path]?.[method]?.responses?.[status]
  expect(response, `${method.toUpperCase()} ${path} ${status} is documented`).toBeTypeOf("object")
  expect(Object.keys(response.content ?? {}), `${method.toUpperCase()} ${path} ${status}`).toEqual([mediaType])
  return response.content[mediaType].schema
}

/** The problem document of docs/API.md §5.1: these members, these required. */
const expectProblemSchema = (schema: unknown, where: string) => {
  const target: any = (schema as any)?.$ref === undefined ? schema : resolve((schema as any).$ref)
  expect(target, where).toBeTypeOf("object")
  expect(target.type, where).toBe("object")
  expect([...target.required].sort(), where).toEqual(["code", "detail", "status", "title", "type"])
  expect(Object.keys(target.properties).sort(), where).toEqual(["code", "detail", "errors", "instance", "status", "title", "type"])
  // And it accepts a real problem and refuses one with a member missing or one too many.
  const sample = { type: "urn:pv:problem:unauthorized", title: "Unauthorized", status: 401, detail: "x", code: "unauthorized" }
  expect(violations(sample, schema), where).toEqual([])
  expect(violations({ ...sample, errors: [{ pointer: "/a", detail: "b" }], instance: "/x" }, schema), where).toEqual([])
  expect(violations({ ...sample, code: undefined }, schema).length, where).toBeGreaterThan(0)
  expect(violations({ title: "t", status: 401, detail: "x", code: "c" }, schema).length, where).toBeGreaterThan(0)
  expect(violations({ ...sample, stack: "at x.ts:1:1" }, schema).length, where).toBeGreaterThan(0)
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

  it("has bearer security schemes, required exactly where docs/API.md requires credentials", () => {
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

  it("states each operation's credential from its definition (RequiredScope, the security middleware), not by hand", () => {
    const documented = new Map(operations().map(({ path, method, operation }) => [endpointKey(method, path), operation]))
    const defined = definedEndpoints().filter((e) => e.documented)
    expect(defined.filter((e) => e.auth === "api-key").length).toBeGreaterThanOrEqual(15)
    for (const e of defined) {
      const operation = documented.get(e.key)
      expect(operation, e.key).toBeDefined()
      if (e.auth === "api-key" && e.scope !== AnyKey) {
        expect(operation["x-required-scope"], e.key).toBe(e.scope)
        expect(operation.security, e.key).toEqual([{ apiKey: [e.scope] }])
        expect(operation.summary, e.key).toMatch(new RegExp(`\\S \\(scope ${e.scope}\\)$`))
      } else {
        expect(operation["x-required-scope"], e.key).toBeUndefined()
        expect(JSON.stringify(operation.security ?? []), e.key).not.toMatch(/:(read|write|call)/)
      }
      if (e.auth === "api-key" && e.scope === AnyKey) {
        expect(operation.security, e.key).toEqual([{ apiKey: [] }])
        expect(operation.summary, e.key).toMatch(/\S \(any API key\)$/)
      }
      if (e.auth === "operator") expect(operation.summary, e.key).toMatch(/\S \(operator\)$/)
      // Said once: no summary names a scope twice or a scope it does not need.
      expect(operation.summary.match(/scope |any API key|\(operator\)/g)?.length ?? 0, e.key).toBe(e.auth === "none" ? 0 : 1)
    }
  })

  it("documents POST /reliance-receipts' 201 and 200 as the stored and the replayed receipt (by `idempotent`)", () => {
    const body = (status: string): any => resolve(responseSchema("/api/v1/reliance-receipts", "post", status, "application/json").$ref)
    expect(body("201").properties.idempotent).toEqual({ type: "boolean", enum: [false] })
    expect(body("200").properties.idempotent).toEqual({ type: "boolean", enum: [true] })
    const { idempotent: _new, ...stored } = body("201").properties
    const { idempotent: _replay, ...replayed } = body("200").properties
    expect(stored).toEqual(replayed)
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
        expectProblemSchema(response.content["application/problem+json"].schema, where)
      }
    }
    expect(errorResponses).toBeGreaterThan(10)
  })

  it("defines the problem schema with the members of docs/API.md §5.1", () => {
    const problem = resolve("#/components/schemas/ProblemDocument") as any
    expect(problem).toBeDefined()
    const body: any = problem.$ref !== undefined && problem.properties === undefined
      ? problem.$defs?.[problem.$ref.split("/").pop()] ?? resolve(problem.$ref)
      : problem
    expect(body.required).toEqual(expect.arrayContaining(["type", "title", "status", "detail", "code"]))
    expect(Object.keys(body.properties).sort()).toEqual(["code", "detail", "errors", "instance", "status", "title", "type"])
  })

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

  it("documents GET /api/v1/events: query parameters, API key, the event page and its errors", () => {
    const operation = spec.paths["/api/v1/events"].get
    const parameter = (name: string) => operation.parameters.find((p: any) => p.name === name && p.in === "query")
    expect(parameter("public_id")).toMatchObject({ required: true, schema: { type: "string" } })
    expect(parameter("after")).toMatchObject({ required: false })
    expect(parameter("limit")).toMatchObject({ required: false })
    expect(operation.parameters.map((p: any) => p.name).sort()).toEqual(["after", "limit", "public_id"])
    expect(schemesOf(operation)).toEqual(schemesOf(spec.paths["/api/v1/trust/{publicId}/machine"].get))
    expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(["200", "401", "403", "404", "422", "429"]))
    for (const status of ["401", "403", "404", "422", "429"]) {
      expectProblemSchema(responseSchema("/api/v1/events", "get", status, "application/problem+json"), `GET /api/v1/events ${status}`)
    }
    const page: any = resolve(responseSchema("/api/v1/events", "get", "200", "application/json").$ref ?? "")
    expect([...page.required].sort()).toEqual(["events", "head", "next_after", "public_id"])
    const event: any = resolve(page.properties.events.items.$ref)
    expect([...event.required].sort()).toEqual([
      "eventHash", "event_id", "occurred_at", "payload", "previousEventHash", "public_id", "sequence", "signature", "type"
    ])
    const signature: any = resolve(event.properties.signature.$ref)
    expect([...signature.required].sort()).toEqual(["alg", "kid", "sig"])
    expect(violations(null, page.properties.next_after)).toEqual([])
    expect(violations(null, event.properties.previousEventHash)).toEqual([])
  })

  it("documents GET /api/v1/events/keys: no credentials, a JWKS of Ed25519 keys", () => {
    const operation = spec.paths["/api/v1/events/keys"].get
    expect(schemesOf(operation)).toEqual([])
    expect(operation.parameters ?? []).toEqual([])
    const jwks: any = resolve(responseSchema("/api/v1/events/keys", "get", "200", "application/json").$ref ?? "")
    expect(jwks.required).toEqual(["keys"])
    const jwk: any = resolve(jwks.properties.keys.items.$ref)
    expect([...jwk.required].sort()).toEqual(["alg", "crv", "kid", "kty", "use", "x"])
    expect(violations({ kty: "OKP", crv: "Ed25519", x: "AAAA", kid: "0123456789abcdef", use: "sig", alg: "Ed25519" }, jwk)).toEqual([])
    expect(violations({ kty: "RSA", crv: "Ed25519", x: "AAAA", kid: "0123456789abcdef", use: "sig", alg: "Ed25519" }, jwk).length).toBeGreaterThan(0)
  })

  it("answers what it documents: real bodies conform to their documented schemas", async () => {
    const { api_key } = await createKey(server, ["trust:read"])
    const cases: ReadonlyArray<readonly [string, string, string, { bearer?: string }]> = [
      ["/api/v1/events", `/api/v1/events?public_id=${publicId}`, "200", { bearer: api_key }],
      ["/api/v1/events/keys", "/api/v1/events/keys", "200", {}],
      ["/api/v1/trust/{publicId}/machine", `/api/v1/trust/${publicId}/machine`, "200", { bearer: api_key }],
      ["/api/v1/events", `/api/v1/events?public_id=${publicId}`, "401", {}],
      ["/api/v1/events", "/api/v1/events?public_id=DET-V1-OPENAPI-9999", "404", { bearer: api_key }],
      ["/api/v1/events", `/api/v1/events?public_id=${publicId}&limit=1001`, "422", { bearer: api_key }]
    ]
    for (const [documented, path, status, options] of cases) {
      const reply = await request(server, "GET", path, options)
      expect(String(reply.status), `${path}: ${reply.text.slice(0, 300)}`).toBe(status)
      const mediaType = Number(status) >= 400 ? "application/problem+json" : "application/json"
      expect(reply.headers.get("content-type")).toMatch(new RegExp(`^${mediaType.replace("+", "\\+")}\\b`))
      const schema = responseSchema(documented, "get", status, mediaType)
      expect(violations(reply.body, schema), `${path} ${status}`).toEqual([])
    }
    // The page really holds an event, so the event schema was exercised, and the key list a key.
    expect((await request(server, "GET", `/api/v1/events?public_id=${publicId}`, { bearer: api_key })).body.events.length).toBeGreaterThan(0)
    expect((await request(server, "GET", "/api/v1/events/keys")).body.keys.length).toBeGreaterThan(0)
  })

  it("is enough for a newcomer: every operation has a summary and a description, and request bodies an example", () => {
    const schemaOf = (ref: string) => spec.components.schemas[ref.replace("#/components/schemas/", "")]
    for (const [path, item] of Object.entries<any>(spec.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        expect(operation.summary?.length ?? 0, `${method} ${path} summary`).toBeGreaterThan(5)
        expect(operation.description?.length ?? 0, `${method} ${path} description`).toBeGreaterThan(20)
      }
    }
    for (const [path, example] of [
      ["/api/v1/reliance-receipts", { principal: "alice", purpose_id: "supplier-onboarding" }],
      ["/api/v1/api-keys", { tenant_id: "demo" }],
      ["/api/v1/subscriptions", { public_id: "DET-V1-ACME-0001" }]
    ] as const) {
      const body = spec.paths[path].post.requestBody.content["application/json"].schema
      const resolved = body.$ref === undefined ? body : schemaOf(body.$ref)
      const examples = JSON.stringify(resolved.examples ?? resolved.example ?? [])
      for (const [member, value] of Object.entries(example)) expect(examples, `${path} example ${member}`).toContain(`"${member}":"${value}"`)
    }
    const redeliver = spec.paths["/api/v1/subscriptions/{subscriptionId}/redeliver"].post.requestBody.content["application/json"].schema
    expect(JSON.stringify(schemaOf(redeliver.$ref ?? "") ?? redeliver)).toContain(`"from_sequence":3`)
  })

  it("serves interactive docs as HTML", async () => {
    const reply = await request(server, "GET", "/docs")
    expect(reply.status).toBe(200)
    expect(reply.headers.get("content-type")).toMatch(/^text\/html\b/)
    expect(reply.text).toMatch(/<html/i)
    expect(reply.text).toContain("Trust Resolution and Reliance Receipt Service")
  })

  it("serves the very page HttpApiScalar.layer would, script and OpenAPI document included", async () => {
    // app/Docs.ts builds the page itself (lazily, from the script's file) to spare every process the
    // script in memory; what a browser gets must not change.
    const scalar = HttpRouter.toWebHandler(HttpApiScalar.layer(Api, { path: "/docs" }).pipe(Layer.provide(HttpServer.layerServices)))
    try {
      const expected = await scalar.handler(new Request("http://localhost/docs"))
      const reply = await request(server, "GET", "/docs")
      expect(reply.headers.get("content-type")).toBe(expected.headers.get("content-type"))
      const page = reply.text
      const wanted = await expected.text()
      expect(page.length).toBeGreaterThan(1_000_000)
      expect(page === wanted).toBe(true)
      // Served again from the page kept in memory, still the same.
      expect((await request(server, "GET", "/docs")).text === wanted).toBe(true)
    } finally {
      await scalar.dispose()
    }
  })
})
