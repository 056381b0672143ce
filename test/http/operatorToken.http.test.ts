import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Option } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { OperatorCredential, operatorTokenFileName } from "../../src/access/Operator.js"
import { definedEndpoints, type DefinedEndpoint } from "../support/authz/endpoints.js"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { expectProblem, type Reply, request } from "../support/http.js"
import { startTestServer, type TestServer, testOperatorToken } from "../support/server.js"
import { isolatedConfig } from "../support/testConfig.js"

/**
 * docs/API.md §3.4 and §14: with no PV_OPERATOR_TOKEN, DATABASE_URL mode never invents a credential (operator
 * endpoints answer 401 to everything), while embedded mode generates one once into its data directory (0600).
 * Each rule runs in the project of its database mode.
 */

const kind = testDatabaseKind()
const publicId = "DET-V1-OPTOKEN-0001"

/** A concrete request for each operator endpoint of the HttpApi definition (a new one without a row fails). */
const operatorCall = (endpoint: DefinedEndpoint): { readonly path: string; readonly body?: unknown } => {
  switch (endpoint.key) {
    case "PUT /api/v1/determinations/{}":
      return { path: `/api/v1/determinations/${publicId}`, body: determinationBody(Date.now() - DAY_MS) }
    case "POST /api/v1/api-keys":
      return { path: "/api/v1/api-keys", body: { tenant_id: "tenant-op", name: "op", scopes: ["trust:read"] } }
    case "GET /api/v1/api-keys":
      return { path: "/api/v1/api-keys?tenant_id=tenant-op" }
    case "DELETE /api/v1/api-keys/{}":
      return { path: "/api/v1/api-keys/key_01ARZ3NDEKTSV4RRFFQ69G5FAV" }
    default:
      throw new Error(`no request written for operator endpoint ${endpoint.key}`)
  }
}
const operatorEndpoints = definedEndpoints().filter((e) => e.auth === "operator")

const send = (server: TestServer, endpoint: DefinedEndpoint, bearer: string | undefined): Promise<Reply> => {
  const call = operatorCall(endpoint)
  return request(server, endpoint.method, call.path, {
    ...(bearer === undefined ? {} : { bearer }),
    ...(call.body === undefined ? {} : { body: call.body })
  })
}

const expectUnauthorized = (reply: Reply, where: string) => {
  expect(reply.status, `${where}: ${reply.text.slice(0, 200)}`).toBe(401)
  expectProblem(reply, 401, "unauthorized")
  expect(reply.headers.get("www-authenticate")).toBe(`Bearer realm="pv", error="invalid_token"`)
}

const credentialOf = (server: TestServer) => server.run(Effect.map(OperatorCredential, (c) => c))

const dataDirs: Array<string> = []
const freshDataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "pv-optoken-"))
  dataDirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true })
})

describe.runIf(kind === "postgres")("DATABASE_URL mode without PV_OPERATOR_TOKEN", () => {
  let server: TestServer
  let dataDir: string
  beforeAll(async () => {
    dataDir = freshDataDir()
    server = await startTestServer({ config: isolatedConfig({}, { operatorToken: Option.none(), dataDir }) })
  })
  afterAll(() => server?.close())

  it("answers 401 on every operator endpoint, whatever the bearer", async () => {
    expect(operatorEndpoints.map((e) => e.key).sort()).toEqual(expect.arrayContaining([
      "DELETE /api/v1/api-keys/{}", "GET /api/v1/api-keys", "POST /api/v1/api-keys", "PUT /api/v1/determinations/{}"
    ]))
    const bearers = [
      undefined,
      "",
      testOperatorToken,
      `pv_op_${randomBytes(32).toString("base64url")}`, // the form embedded mode would generate
      randomBytes(48).toString("hex")
    ]
    for (const endpoint of operatorEndpoints) {
      for (const bearer of bearers) expectUnauthorized(await send(server, endpoint, bearer), `${endpoint.key} with ${JSON.stringify(bearer)}`)
    }
    // Nothing was ingested on the way.
    expectProblem(await request(server, "GET", `/api/v1/trust/${publicId}/human`), 404, "determination-not-found")
  })

  it("never invents a credential: none configured, none generated, nothing written", async () => {
    const credential = await credentialOf(server)
    expect(credential.configured).toBe(false)
    expect(Option.isNone(credential.token)).toBe(true)
    expect(Option.isNone(credential.generatedFile)).toBe(true)
    expect(readdirSync(dataDir)).not.toContain(operatorTokenFileName)
  })
})

describe.runIf(kind === "pglite")("embedded mode without PV_OPERATOR_TOKEN", () => {
  const servers: Array<TestServer> = []
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.close()
  })
  const start = async (dataDir: string, operatorToken: Option.Option<never> | undefined) => {
    const server = await startTestServer({
      config: isolatedConfig({}, { dataDir, ...(operatorToken === undefined ? {} : { operatorToken }) })
    })
    servers.push(server)
    return server
  }

  it("generates a token once into the data directory, mode 0600, that authenticates the operator endpoints", async () => {
    const dataDir = freshDataDir()
    const file = join(dataDir, operatorTokenFileName)
    const first = await start(dataDir, Option.none())
    expect(existsSync(file)).toBe(true)
    expect(statSync(file).mode & 0o777).toBe(0o600)
    const token = readFileSync(file, "utf8").trim()
    expect(token.length).toBeGreaterThanOrEqual(32)
    expect(token).not.toBe(testOperatorToken)
    const credential = await credentialOf(first)
    expect(credential.configured).toBe(true)
    expect(credential.generatedFile).toEqual(Option.some(file))

    // The generated token is the operator credential; nothing else is.
    for (const endpoint of operatorEndpoints) {
      expectUnauthorized(await send(first, endpoint, undefined), `${endpoint.key} without a token`)
      expectUnauthorized(await send(first, endpoint, testOperatorToken), `${endpoint.key} with another token`)
      const reply = await send(first, endpoint, token)
      expect(reply.status, `${endpoint.key} with the generated token: ${reply.text.slice(0, 200)}`).not.toBe(401)
      expect(reply.status).toBeLessThan(500)
    }
    expect((await request(first, "GET", "/api/v1/api-keys", { bearer: token })).status).toBe(200)
    await first.close()
    servers.splice(0)

    // A restart on the same data directory keeps the token and generates nothing.
    const second = await start(dataDir, Option.none())
    expect(readFileSync(file, "utf8").trim()).toBe(token)
    expect((await credentialOf(second)).generatedFile).toEqual(Option.none())
    expect(statSync(file).mode & 0o777).toBe(0o600)
    const listed = await request(second, "GET", "/api/v1/api-keys?tenant_id=tenant-op", { bearer: token })
    expect(listed.status).toBe(200)
    expect(listed.body.keys).toHaveLength(1) // created by the first start, through its POST above
  })

  it("generates nothing when PV_OPERATOR_TOKEN is set", async () => {
    const dataDir = freshDataDir()
    const server = await start(dataDir, undefined)
    expect(readdirSync(dataDir)).not.toContain(operatorTokenFileName)
    expect((await credentialOf(server)).generatedFile).toEqual(Option.none())
    expect((await request(server, "GET", "/api/v1/api-keys", { bearer: testOperatorToken })).status).toBe(200)
  })
})
