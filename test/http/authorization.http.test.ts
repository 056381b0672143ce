import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AnyKey, type KeyScope } from "../../src/api/Auth.js"
import { type Scope, Scopes } from "../../src/domain/ApiKey.js"
import { keyWithWrongChecksum, malformedBearer, neverIssuedKey } from "../support/authz/credentials.js"
import { type AuthKind, definedEndpoints, endpointKey } from "../support/authz/endpoints.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { asOperator, createKey, expectProblem, putDetermination, type Reply, request, type RequestOptions } from "../support/http.js"
import { isolatedConfig } from "../support/testConfig.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * Issue 10 item 10: the authorization matrix. Every endpoint of the HttpApi definition (src/app/Api.ts)
 * × every kind of credential, against the expectation table below (docs/API.md §3, §7, §11, §12).
 * The endpoint list is generated from the definition, so an endpoint cannot ship without its row here.
 * The scope of an API-key endpoint is its RequiredScope annotation, the one declaration ApiKeyAuth enforces
 * (issue 20): every scoped endpoint is called with a key holding every scope but that one, and must get
 * its 403. (test/access/scopes.test.ts holds the annotations to docs/API.md §3.2.)
 */

const invalidTokenChallenge = `Bearer realm="pv", error="invalid_token"`
const scopeChallenge = (scope: string) => `Bearer realm="pv", error="insufficient_scope", scope="${scope}"`

let server: TestServer
const publicId = "DET-V1-AUTHZ-0001"
let detBody: ReturnType<typeof determinationBody>

/** Everything the rows need: real ids and keys, provisioned once per server. */
interface Ctx {
  allScopes: string
  allScopesTenant: string
  otherTenant: string
  revoked: string
  expiring: string
  expiresAtMs: number
  /** The key of a single, unrelated scope: enough for "any scope" endpoints. */
  onlySubscription: string
  receiptId: string
  /** A webhook subscription of the all-scopes key's tenant. */
  subscriptionId: string
  /** Subscriptions the DELETE row removes (valid) or must leave in place (denied). */
  validVictimSubscriptionId: string
  deniedVictimSubscriptionId: string
  deniedVictimKeyId: string
  deniedVictimKey: string
  validVictimKeyId: string
  /** Keys holding every scope but one, by the missing scope. */
  lacking: Map<Scope, string>
}
const ctx = {} as Ctx

const receiptBody = (principal: string, tenant = "tenant-a") => ({
  tenant_id: tenant,
  organization: "Authz Buyers",
  principal,
  subject_public_id: publicId,
  purpose_id: "supplier-onboarding",
  requested_action: "screen",
  claim_scope: ["identity"]
})

/** A concrete request for a row: `as` is "valid" only for the valid-credential row (which may have effects). */
interface Call {
  readonly path: string
  readonly body?: unknown
}
type Use = "denied" | "valid"

interface Row {
  readonly auth: AuthKind
  /** The scope an API-key endpoint needs (AnyKey: any key with any scope): its RequiredScope, filled in from the definition. */
  readonly scope?: KeyScope
  /** Tenant-bound resource: what another tenant's key gets. */
  readonly otherTenant?: { readonly status: number; readonly code: string }
  /** Status(es) of the valid credential (any credential for open endpoints). */
  readonly success: ReadonlyArray<number>
  /** When the endpoint's answer is always a problem (e.g. 405): its code. */
  readonly successProblem?: string
  /** Served outside the HttpApi definition (docs, OpenAPI): tested, but not part of the generated set. */
  readonly outsideDefinition?: true
  /** A receipt proof or log endpoint (docs/API.md §7.7, §11), added later: a row the definition must grow. */
  readonly proofOrLog?: true
  readonly call: (use: Use) => Call
}

/**
 * The expectation table: endpoint → required credential kind and scope, and the answer of a valid caller.
 * Keys are `METHOD /path` with path parameters written `{}`.
 */
const table: Readonly<Record<string, Row>> = {
  // docs/API.md §3: open
  "GET /healthz": { auth: "none", success: [200], call: () => ({ path: "/healthz" }) },
  "GET /readyz": { auth: "none", success: [200], call: () => ({ path: "/readyz" }) },
  "GET /api/v1/trust/{}/human": { auth: "none", success: [200], call: () => ({ path: `/api/v1/trust/${publicId}/human` }) },
  "GET /api/v1/events/keys": { auth: "none", success: [200], call: () => ({ path: "/api/v1/events/keys" }) },
  "GET /api/v1/webhooks/signing-key": { auth: "none", success: [200], call: () => ({ path: "/api/v1/webhooks/signing-key" }) },
  "GET /openapi.json": { auth: "none", success: [200], outsideDefinition: true, call: () => ({ path: "/openapi.json" }) },
  "GET /docs": { auth: "none", success: [200], outsideDefinition: true, call: () => ({ path: "/docs" }) },
  // docs/API.md §12.1: GET → 405 (no stream, no session); the definition attaches no credential to it.
  "GET /api/v1/mcp": { auth: "none", success: [405], successProblem: "method-not-allowed", call: () => ({ path: "/api/v1/mcp" }) },
  "DELETE /api/v1/mcp": { auth: "none", success: [405], successProblem: "method-not-allowed", call: () => ({ path: "/api/v1/mcp" }) },

  // docs/API.md §3.2: API key with a scope
  "GET /api/v1/trust/{}/machine": {
    auth: "api-key", success: [200], call: () => ({ path: `/api/v1/trust/${publicId}/machine` })
  },
  "POST /api/v1/reliance-receipts": {
    auth: "api-key", success: [201],
    otherTenant: { status: 403, code: "forbidden" },
    call: (use) => ({ path: "/api/v1/reliance-receipts", body: receiptBody(use === "valid" ? "authz:valid" : "authz:denied") })
  },
  "GET /api/v1/reliance-receipts/{}": {
    auth: "api-key", success: [200],
    otherTenant: { status: 404, code: "receipt-not-found" },
    call: () => ({ path: `/api/v1/reliance-receipts/${ctx.receiptId}` })
  },
  "POST /api/v1/actionability": {
    auth: "api-key", success: [200],
    // The same tenant rule as receipts: the body's tenant_id must be the key's (src/receipts/Api.ts declares Forbidden).
    otherTenant: { status: 403, code: "forbidden" },
    call: () => ({ path: "/api/v1/actionability", body: receiptBody("authz:evaluate") })
  },
  "GET /api/v1/policy": { auth: "api-key", success: [200], call: () => ({ path: "/api/v1/policy" }) },
  "POST /api/v1/mcp": {
    auth: "api-key", success: [200],
    call: () => ({ path: "/api/v1/mcp", body: { jsonrpc: "2.0", id: 1, method: "ping" } })
  },
  "GET /api/v1/events": {
    auth: "api-key", success: [200], call: () => ({ path: `/api/v1/events?public_id=${publicId}` })
  },
  // A live stream: the first message is read, then the request is aborted (support/http.ts).
  "GET /api/v1/events/stream": {
    auth: "api-key", success: [200], call: () => ({ path: `/api/v1/events/stream?public_id=${publicId}` })
  },

  // Subscriptions and webhooks (third round): scope subscription:write, tenant-owned.
  "POST /api/v1/subscriptions": {
    auth: "api-key", success: [200, 201],
    call: () => ({ path: "/api/v1/subscriptions", body: { public_id: publicId } })
  },
  "GET /api/v1/subscriptions": {
    auth: "api-key", success: [200], call: () => ({ path: "/api/v1/subscriptions" })
  },
  "GET /api/v1/subscriptions/{}": {
    auth: "api-key", success: [200], otherTenant: { status: 404, code: "not-found" },
    call: () => ({ path: `/api/v1/subscriptions/${ctx.subscriptionId}` })
  },
  "DELETE /api/v1/subscriptions/{}": {
    auth: "api-key", success: [204], otherTenant: { status: 404, code: "not-found" },
    call: (use) => ({ path: `/api/v1/subscriptions/${use === "valid" ? ctx.validVictimSubscriptionId : ctx.deniedVictimSubscriptionId}` })
  },
  "POST /api/v1/subscriptions/{}/resume": {
    auth: "api-key", success: [200], otherTenant: { status: 404, code: "not-found" },
    call: () => ({ path: `/api/v1/subscriptions/${ctx.subscriptionId}/resume` })
  },
  "POST /api/v1/subscriptions/{}/rotate-secret": {
    auth: "api-key", success: [200], otherTenant: { status: 404, code: "not-found" },
    call: () => ({ path: `/api/v1/subscriptions/${ctx.subscriptionId}/rotate-secret` })
  },
  "GET /api/v1/subscriptions/{}/attempts": {
    auth: "api-key", success: [200], otherTenant: { status: 404, code: "not-found" },
    call: () => ({ path: `/api/v1/subscriptions/${ctx.subscriptionId}/attempts` })
  },
  "POST /api/v1/subscriptions/{}/redeliver": {
    auth: "api-key", success: [202], otherTenant: { status: 404, code: "not-found" },
    call: () => ({ path: `/api/v1/subscriptions/${ctx.subscriptionId}/redeliver`, body: { from_sequence: 1 } })
  },

  // docs/API.md §3.4: operator
  "PUT /api/v1/determinations/{}": {
    auth: "operator", success: [200], call: () => ({ path: `/api/v1/determinations/${publicId}`, body: detBody })
  },
  "POST /api/v1/api-keys": {
    auth: "operator", success: [201],
    call: (use) => ({
      path: "/api/v1/api-keys",
      body: { tenant_id: use === "valid" ? "tenant-authz-created" : "tenant-authz-denied", name: "authz", scopes: ["trust:read"] }
    })
  },
  "GET /api/v1/api-keys": { auth: "operator", success: [200], call: () => ({ path: "/api/v1/api-keys?tenant_id=tenant-a" }) },
  "DELETE /api/v1/api-keys/{}": {
    auth: "operator", success: [204],
    call: (use) => ({ path: `/api/v1/api-keys/${use === "valid" ? ctx.validVictimKeyId : ctx.deniedVictimKeyId}` })
  },

  // Added later (docs/API.md §11.7, §11): the receipt proof bundle and the transparency log
  "GET /api/v1/reliance-receipts/{}/proof": {
    auth: "api-key", success: [200], proofOrLog: true,
    otherTenant: { status: 404, code: "receipt-not-found" },
    call: () => ({ path: `/api/v1/reliance-receipts/${ctx.receiptId}/proof` })
  },
  // docs/API.md "Evidence in standard encodings": the same proof in C2SP and COSE forms
  "GET /api/v1/reliance-receipts/{}/tlog-proof": {
    auth: "api-key", success: [200], proofOrLog: true,
    otherTenant: { status: 404, code: "receipt-not-found" },
    call: () => ({ path: `/api/v1/reliance-receipts/${ctx.receiptId}/tlog-proof` })
  },
  "GET /api/v1/reliance-receipts/{}/cose-receipt": {
    auth: "api-key", success: [200], proofOrLog: true,
    otherTenant: { status: 404, code: "receipt-not-found" },
    call: () => ({ path: `/api/v1/reliance-receipts/${ctx.receiptId}/cose-receipt` })
  },
  "GET /api/v1/reliance-receipts/{}/transparent-statement": {
    auth: "api-key", success: [200], proofOrLog: true,
    otherTenant: { status: 404, code: "receipt-not-found" },
    call: () => ({ path: `/api/v1/reliance-receipts/${ctx.receiptId}/transparent-statement` })
  },
  "GET /api/v1/log/checkpoint": { auth: "none", success: [200], proofOrLog: true, call: () => ({ path: "/log/checkpoint" }) },
  "GET /api/v1/log/key": { auth: "none", success: [200], proofOrLog: true, call: () => ({ path: "/log/key" }) },
  "GET /api/v1/log/policy": { auth: "none", success: [200], proofOrLog: true, call: () => ({ path: "/log/policy" }) },
  "GET /api/v1/log/proof/inclusion": {
    auth: "none", success: [200], proofOrLog: true, call: () => ({ path: "/log/proof/inclusion?index=0&tree_size=1" })
  },
  "GET /api/v1/log/proof/consistency": {
    auth: "none", success: [200], proofOrLog: true, call: () => ({ path: "/log/proof/consistency?first=1&second=1" })
  }
}

/** docs/API.md §11: every `/log/…` read path is open. Tile paths not named above are held to this rule. */
const isLogPath = (key: string) => /^GET (\/api\/v1)?\/log\//.test(key)

const defined = definedEndpoints()
const definedKeys = new Set(defined.map((e) => e.key))

/** A row with its endpoint's scope, as the definition declares it (RequiredScope). */
const withScope = (key: string, row: Row): Row => {
  const scope = defined.find((e) => e.key === key)?.scope
  return scope === undefined ? row : { ...row, scope }
}

// ---- credentials ----

type CredentialKind =
  | "no Authorization header"
  | "malformed bearer"
  | "pv_live_ key with a wrong checksum"
  | "well-formed key never issued"
  | "revoked key"
  | "expired key"
  | "key lacking the scope"
  | "key of another tenant"
  | "operator token"
  | "API key with every scope"
  | "valid credential"

const bearerFor = (kind: CredentialKind, row: Row): string | undefined => {
  switch (kind) {
    case "no Authorization header": return undefined
    case "malformed bearer": return malformedBearer
    case "pv_live_ key with a wrong checksum": return keyWithWrongChecksum()
    case "well-formed key never issued": return neverIssuedKey()
    case "revoked key": return ctx.revoked
    case "expired key": return ctx.expiring
    case "key lacking the scope": return ctx.lacking.get(row.scope as Scope)!
    case "key of another tenant": return ctx.otherTenant
    case "operator token": return server.operatorToken
    case "API key with every scope": return ctx.allScopes
    case "valid credential":
      return row.auth === "operator" ? server.operatorToken
        : row.auth === "api-key" ? (row.scope === AnyKey ? ctx.onlySubscription : ctx.allScopes)
        : undefined
  }
}

/** The credential rows that apply to an endpoint, and what each must get. */
const rowsFor = (row: Row): ReadonlyArray<CredentialKind> => {
  const always: Array<CredentialKind> = [
    "no Authorization header", "malformed bearer", "pv_live_ key with a wrong checksum", "well-formed key never issued",
    "revoked key", "expired key"
  ]
  switch (row.auth) {
    case "none":
      return [...always, "operator token", "API key with every scope", "valid credential"]
    case "operator":
      return [...always, "API key with every scope", "valid credential"]
    case "api-key":
      return [
        ...always,
        ...(row.scope !== AnyKey ? ["key lacking the scope" as const] : []),
        ...(row.otherTenant !== undefined ? ["key of another tenant" as const] : []),
        "operator token",
        "valid credential"
      ]
  }
}

const send = async (method: string, row: Row, kind: CredentialKind): Promise<Reply> => {
  const call = row.call(kind === "valid credential" ? "valid" : "denied")
  const bearer = bearerFor(kind, row)
  const options = { ...(bearer === undefined ? {} : { bearer }), ...(call.body === undefined ? {} : { body: call.body }) }
  if (kind !== "expired key") return request(server, method, call.path, options)
  // The key expires 60 s after creation: move the server's clock past it for this one request.
  const shift = ctx.expiresAtMs - server.clock.currentTimeMillisUnsafe() + 10 * 60_000
  server.clock.advance(shift)
  try {
    return await request(server, method, call.path, options)
  } finally {
    server.clock.advance(-shift)
  }
}

const expectUnauthorized = (reply: Reply) => {
  expectProblem(reply, 401, "unauthorized")
  expect(reply.headers.get("www-authenticate")).toBe(invalidTokenChallenge)
}

const expectSuccess = (reply: Reply, row: Row) => {
  expect(row.success, `${reply.status} ${reply.text.slice(0, 500)}`).toContain(reply.status)
  if (row.successProblem !== undefined) {
    expectProblem(reply, reply.status, row.successProblem)
    if (reply.status === 405) expect(reply.headers.get("allow")).toBe("POST")
  }
}

/** What one credential row must get on one endpoint (docs/API.md §3, §5, §7, §11, §12). */
const expectOutcome = (reply: Reply, row: Row, kind: CredentialKind) => {
  if (row.auth === "none") return expectSuccess(reply, row)
  switch (kind) {
    case "valid credential":
      return expectSuccess(reply, row)
    case "key lacking the scope": {
      expectProblem(reply, 403, "insufficient-scope")
      expect(reply.headers.get("www-authenticate")).toBe(scopeChallenge(row.scope!))
      return
    }
    case "key of another tenant":
      expectProblem(reply, row.otherTenant!.status, row.otherTenant!.code)
      return
    default:
      return expectUnauthorized(reply)
  }
}

/** Revocation takes effect within 2 s (docs/API.md §3.1). */
const waitUntilRefused = async (key: string) => {
  const deadline = Date.now() + 2_500
  for (;;) {
    const reply = await request(server, "GET", "/api/v1/policy", { bearer: key })
    if (reply.status === 401 || Date.now() > deadline) return reply
    await new Promise((r) => setTimeout(r, 100))
  }
}

beforeAll(async () => {
  server = await startTestServer({ config: isolatedConfig({ PV_WEBHOOK_ALLOW_HTTP: "true", PV_WEBHOOK_ALLOW_PRIVATE: "true" }) })
  detBody = determinationBody(Date.now() - DAY_MS)
  expect((await putDetermination(server, publicId, detBody)).status).toBe(201)

  const all = await createKey(server, Scopes, { name: "authz all scopes" })
  ctx.allScopes = all.api_key
  ctx.allScopesTenant = all.tenant_id
  ctx.otherTenant = (await createKey(server, Scopes, { tenant_id: "tenant-b", name: "authz other tenant" })).api_key
  ctx.onlySubscription = (await createKey(server, ["subscription:write"])).api_key
  ctx.lacking = new Map()
  for (const scope of Scopes) ctx.lacking.set(scope, (await createKey(server, Scopes.filter((s) => s !== scope))).api_key)

  const revoked = await createKey(server, Scopes, { name: "authz revoked" })
  expect((await request(server, "GET", "/api/v1/policy", { bearer: revoked.api_key })).status).toBe(200)
  expect((await request(server, "DELETE", `/api/v1/api-keys/${revoked.key_id}`, asOperator(server))).status).toBe(204)
  expect((await waitUntilRefused(revoked.api_key)).status).toBe(401)
  ctx.revoked = revoked.api_key

  ctx.expiresAtMs = server.clock.currentTimeMillisUnsafe() + 60_000
  const expiring = await createKey(server, Scopes, { name: "authz expiring", expires_at: new Date(ctx.expiresAtMs).toISOString() })
  // Valid before its expiry: the 401 of the expired row is the expiry's doing.
  expect((await request(server, "GET", "/api/v1/policy", { bearer: expiring.api_key })).status).toBe(200)
  ctx.expiring = expiring.api_key

  const deniedVictim = await createKey(server, ["trust:read"], { name: "authz victim (never revoked)" })
  ctx.deniedVictimKeyId = deniedVictim.key_id
  ctx.deniedVictimKey = deniedVictim.api_key
  ctx.validVictimKeyId = (await createKey(server, ["trust:read"], { name: "authz victim (revoked by the operator row)" })).key_id

  const receipt = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: ctx.allScopes, body: receiptBody("authz:setup") })
  expect(receipt.status, receipt.text).toBe(201)
  ctx.receiptId = receipt.body.receipt_id

  // Webhook subscriptions to a loopback port nobody listens on (the development allowances are on for this server).
  const subscribe = async (path: string) => {
    const reply = await request(server, "POST", "/api/v1/subscriptions", {
      bearer: ctx.allScopes,
      body: { public_id: publicId, webhook_url: `http://127.0.0.1:9${path}` }
    })
    expect(reply.status, reply.text).toBe(201)
    return reply.body.subscription_id as string
  }
  ctx.subscriptionId = await subscribe("/authz")
  ctx.validVictimSubscriptionId = await subscribe("/authz-valid-victim")
  ctx.deniedVictimSubscriptionId = await subscribe("/authz-denied-victim")
})
afterAll(() => server?.close())

describe(`authorization matrix (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  describe("the matrix covers the HttpApi definition", () => {
    it("enumerates a non-trivial definition (sanity of the generator)", () => {
      expect(defined.length).toBeGreaterThanOrEqual(17)
      expect(defined.find((e) => e.key === "GET /api/v1/trust/{}/machine")?.auth).toBe("api-key")
      expect(defined.find((e) => e.key === "PUT /api/v1/determinations/{}")?.auth).toBe("operator")
      expect(defined.find((e) => e.key === "GET /healthz")?.auth).toBe("none")
    })

    it("has an expectation for every endpoint the definition serves", () => {
      const missing = defined.filter((e) => table[e.key] === undefined && !isLogPath(e.key))
        .map((e) => `${e.key} (group ${e.group}, endpoint ${e.name}, auth ${e.auth})`)
      expect(missing, "endpoints without a row in the authorization table").toEqual([])
    })

    it("demands, in the definition, exactly the credential the table expects", () => {
      const mismatched = defined.flatMap((e) => {
        const expected = table[e.key]?.auth ?? (isLogPath(e.key) ? "none" : undefined)
        return expected === undefined || expected === e.auth
          ? []
          : [`${e.key}: definition ${e.auth} [${e.middlewares.join(", ")}], table ${expected}`]
      })
      expect(mismatched).toEqual([])
    })

    it("takes each API-key endpoint's scope from its RequiredScope annotation, so each scoped one gets its 403 row", () => {
      const known = new Set<string>([...Scopes, AnyKey])
      const wrong = defined.flatMap((e) =>
        e.auth === "api-key" ? (e.scope !== undefined && known.has(e.scope) ? [] : [`${e.key}: scope ${String(e.scope)}`])
          : e.scope === undefined ? [] : [`${e.key}: ${e.auth}, yet scope ${e.scope}`])
      expect(wrong).toEqual([])
      const lacking = defined.filter((e) => table[e.key] !== undefined && rowsFor(withScope(e.key, table[e.key]!)).includes("key lacking the scope"))
      expect(lacking.map((e) => e.key).sort()).toEqual(defined.filter((e) => e.auth === "api-key" && e.scope !== AnyKey).map((e) => e.key).sort())
      expect(lacking.length).toBeGreaterThanOrEqual(14)
    })

    it("serves every endpoint of docs/API.md §7 but the proof and log ones from the definition", () => {
      const absent = Object.entries(table).filter(([key, row]) => !row.outsideDefinition && !row.proofOrLog && !definedKeys.has(key))
      expect(absent.map(([key]) => key)).toEqual([])
    })

    it("serves the receipt proof and log endpoints (docs/API.md §7.7, §11) from the definition", () => {
      const absent = Object.entries(table).filter(([key, row]) => row.proofOrLog === true && !definedKeys.has(key))
      expect(absent.map(([key]) => key), "receipt proof and log endpoints missing from src/app/Api.ts").toEqual([])
    })

    it("documents the same operations and security in /openapi.json", async () => {
      const spec = (await request(server, "GET", "/openapi.json")).body
      const documented = new Map<string, Array<string>>()
      for (const [path, item] of Object.entries<Record<string, any>>(spec.paths)) {
        for (const [method, operation] of Object.entries<any>(item)) {
          if (!["get", "put", "post", "delete", "patch"].includes(method)) continue
          const schemes = (operation.security ?? spec.security ?? []).flatMap((r: Record<string, unknown>) => Object.keys(r))
          documented.set(endpointKey(method, path), schemes)
        }
      }
      // The root /log alias serves the log group's own definitions again, left out of the document.
      const documentedDefinitions = defined.filter((e) => e.documented)
      expect([...documented.keys()].sort()).toEqual(documentedDefinitions.map((e) => e.key).sort())
      for (const e of documentedDefinitions) {
        const expected = e.auth === "api-key" ? ["apiKey"] : e.auth === "operator" ? ["operator"] : []
        expect(documented.get(e.key), e.key).toEqual(expected)
      }
    })
  })

  const testedKeys = [
    ...defined.map((e) => e.key).filter((key) => table[key] !== undefined),
    ...Object.entries(table).filter(([key, row]) => row.outsideDefinition || (row.proofOrLog && !definedKeys.has(key))).map(([key]) => key)
  ]
  /**
   * A receipt proof or log endpoint the definition lacks (reported above) may still be served outside it: its rows run
   * when the route answers with anything but 404 not-found, and are skipped otherwise.
   */
  const served = new Map<string, Promise<boolean>>()
  const isServed = (key: string, row: Row) => {
    if (!served.has(key)) {
      served.set(key, send(key.slice(0, key.indexOf(" ")), row, "valid credential").then((reply) => !(reply.status === 404 && reply.body?.code === "not-found")))
    }
    return served.get(key)!
  }
  for (const key of testedKeys) {
    const row = withScope(key, table[key]!)
    const method = key.slice(0, key.indexOf(" "))
    describe(`${key} (${row.auth === "api-key" ? `key, ${row.scope}` : row.auth})`, () => {
      for (const kind of rowsFor(row)) {
        it(kind, async (test) => {
          if (row.proofOrLog === true && !definedKeys.has(key) && !(await isServed(key, row))) return test.skip()
          let reply = await send(method, row, kind)
          // docs/API.md §11.3: a receipt's proof exists once its entry is integrated (within 2 s).
          for (let i = 0; i < 30 && kind === "valid credential" && reply.status === 404 && reply.body?.code === "not-yet-logged"; i++) {
            await new Promise((r) => setTimeout(r, 100))
            reply = await send(method, row, kind)
          }
          expectOutcome(reply, row, kind)
        })
      }
    })
  }

  // docs/API.md §11: log read paths not named in the table (tiles) are open: no credential changes the answer.
  for (const endpoint of defined.filter((e) => table[e.key] === undefined && isLogPath(e.key))) {
    it(`${endpoint.key}: open, the same answer with any credential`, async () => {
      const path = endpoint.path.replace(/:[A-Za-z0-9_]+\??/g, "0")
      const baseline = await request(server, "GET", path)
      expect([401, 403]).not.toContain(baseline.status)
      for (const bearer of [malformedBearer, keyWithWrongChecksum(), neverIssuedKey(), ctx.revoked, server.operatorToken, ctx.allScopes]) {
        const reply = await request(server, "GET", path, { bearer })
        expect(reply.status, `${path} with ${bearer.slice(0, 12)}…`).toBe(baseline.status)
      }
    })
  }

  describe("the scope is checked before anything of the request is read (docs/API.md §3.2)", () => {
    it("answers 403 to a key without the scope whatever its body, path or query hold; a key with it gets the request's own refusal", async () => {
      const json = { "content-type": "application/json" }
      const cases: ReadonlyArray<readonly [string, string, Scope, RequestOptions, number]> = [
        ["POST", "/api/v1/reliance-receipts", "receipt:write", { rawBody: "{not json", headers: json }, 400],
        ["POST", "/api/v1/reliance-receipts", "receipt:write", { body: { ...receiptBody("authz:order"), decision: "ACTIONABLE" } }, 422],
        ["POST", "/api/v1/actionability", "actionability:read", { rawBody: "[1,", headers: json }, 400],
        ["POST", "/api/v1/subscriptions", "subscription:write", { body: { public_id: publicId, extra: 1 } }, 422],
        ["GET", "/api/v1/events?public_id=DET-V1-AUTHZ-0001&limit=abc", "trust:read", {}, 422],
        ["GET", "/api/v1/trust/not-a-public-id/machine", "trust:read", {}, 400],
        ["POST", "/api/v1/mcp", "mcp:call", { rawBody: "{", headers: { "content-type": "text/plain" } }, 415]
      ]
      for (const [method, path, scope, options, own] of cases) {
        const refused = await request(server, method, path, { ...options, bearer: ctx.lacking.get(scope)! })
        expectProblem(refused, 403, "insufficient-scope")
        expect(refused.headers.get("www-authenticate"), `${method} ${path}`).toBe(scopeChallenge(scope))
        const allowed = await request(server, method, path, { ...options, bearer: ctx.allScopes })
        expect(allowed.status, `${method} ${path}: ${allowed.text.slice(0, 200)}`).toBe(own)
      }
    })
  })

  describe("refused requests changed nothing", () => {
    it("left the victim key working, created no key for the refused tenant, kept the determination", async () => {
      expect((await request(server, "GET", `/api/v1/trust/${publicId}/machine`, { bearer: ctx.deniedVictimKey })).status).toBe(200)
      const keys = await request(server, "GET", "/api/v1/api-keys?tenant_id=tenant-authz-denied", asOperator(server))
      expect(keys.status).toBe(200)
      expect(keys.body.keys).toEqual([])
      const again = await putDetermination(server, publicId, detBody)
      expect(again.status).toBe(200)
      expect(again.body.outcome).toBe("unchanged")
      expect(again.body.version).toBe(1)
    })

    it("stored no receipt for the refused principal (its first valid creation is new: 201)", async () => {
      const reply = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: ctx.allScopes, body: receiptBody("authz:denied") })
      expect(reply.status, reply.text).toBe(201)
      expect(reply.body.idempotent).toBe(false)
      expect(reply.body.tenant_id).toBe(ctx.allScopesTenant)
    })
  })
})
