import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generateApiKey, hashApiKey, isWellFormedApiKey, Scopes } from "../../src/domain/ApiKey.js"
import { pollUntil, withShiftedClock } from "../support/clockShift.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { asOperator, createKey, putDetermination, type Reply, request, expectProblem } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { isolatedConfig } from "../support/testConfig.js"

const invalidToken = `Bearer realm="pv", error="invalid_token"`
const internalToken = "internal-token-for-tests-0123456789"

/** 401 with the challenge of docs/API.md §5.1. */
const expectUnauthorized = (reply: Reply) => {
  expectProblem(reply, 401, "unauthorized")
  expect(reply.headers.get("www-authenticate")).toBe(invalidToken)
}

const pointersOf = (reply: Reply): Array<string> => (reply.body?.errors ?? []).map((e: { pointer: string }) => e.pointer)

let server: TestServer
const id = "DET-V1-ACCESS-0001"
const machinePath = `/api/v1/trust/${id}/machine`
let readKey: string

const machine = (options: Parameters<typeof request>[3] = {}) => request(server, "GET", machinePath, options)
const createKeyReply = (body: unknown) => request(server, "POST", "/api/v1/api-keys", { ...asOperator(server), body })
const listKeys = (tenant?: string) =>
  request(server, "GET", `/api/v1/api-keys${tenant === undefined ? "" : `?tenant_id=${encodeURIComponent(tenant)}`}`, asOperator(server))

/** Revocation reaches every instance within 2 s (docs/API.md §3.1): wait at most that long for the 401. */
const eventuallyUnauthorized = (key: string) =>
  pollUntil(() => machine({ bearer: key }), (reply) => reply.status !== 200, { timeoutMs: 2_000, intervalMs: 100 })

beforeAll(async () => {
  server = await startTestServer({ config: isolatedConfig({ PV_INTERNAL_TOKEN: internalToken }) })
  readKey = (await createKey(server, ["trust:read"])).api_key
  expect((await putDetermination(server, id, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
})
afterAll(() => server?.close())

describe(`authentication on the machine endpoint (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("answers 200 to a valid key with trust:read", async () => {
    const reply = await machine({ bearer: readKey })
    expect(reply.status).toBe(200)
    expect(reply.body.schema).toBe("pv.machine-trust.v1")
  })

  it("answers 401 without an Authorization header", async () => {
    expectUnauthorized(await machine())
  })

  it("answers 401 to a malformed Authorization header", async () => {
    for (const authorization of [
      "Bearer", "Bearer ", "Bearer not-a-key", `Bearer ${readKey.slice(0, -1)}`, `Bearer ${readKey}x`, `Basic ${Buffer.from(`x:${readKey}`).toString("base64")}`,
      readKey, `Token ${readKey}`, `Bearer pv_live_${"0".repeat(38)}`
    ]) {
      expectUnauthorized(await machine({ headers: { authorization } }))
    }
  })

  it("answers 401 to a key whose checksum does not match", async () => {
    const last = readKey.at(-1)!
    const badChecksum = readKey.slice(0, -1) + (last === "a" ? "b" : "a")
    expect(isWellFormedApiKey(badChecksum)).toBe(false)
    expectUnauthorized(await machine({ bearer: badChecksum }))
    const badSecret = readKey.slice(0, 10) + (readKey[10] === "A" ? "B" : "A") + readKey.slice(11)
    expectUnauthorized(await machine({ bearer: badSecret }))
  })

  it("answers 401 to a well-formed key the service never issued", async () => {
    const unknown = generateApiKey()
    expect(isWellFormedApiKey(unknown)).toBe(true)
    expectUnauthorized(await machine({ bearer: unknown }))
  })

  it("answers 401 to a revoked key", async () => {
    const key = await createKey(server, ["trust:read"])
    expect((await machine({ bearer: key.api_key })).status).toBe(200)
    const revoked = await request(server, "DELETE", `/api/v1/api-keys/${key.key_id}`, asOperator(server))
    expect(revoked.status).toBe(204)
    expectUnauthorized(await eventuallyUnauthorized(key.api_key))
    // Still refused later, once the 1 s key cache (read on the server's clock) has turned over.
    await withShiftedClock(server.clock, async (shift) => {
      shift.by(1_100)
      expectUnauthorized(await machine({ bearer: key.api_key }))
    })
  })

  it("answers 403 insufficient-scope to a key without trust:read", async () => {
    for (const scopes of [["receipt:read"], Scopes.filter((s) => s !== "trust:read")]) {
      const key = await createKey(server, scopes)
      const reply = await machine({ bearer: key.api_key })
      expectProblem(reply, 403, "insufficient-scope")
      expect(reply.headers.get("www-authenticate")).toBe(`Bearer realm="pv", error="insufficient_scope", scope="trust:read"`)
    }
  })

  it("answers 401 to the operator token on an API-key endpoint", async () => {
    expectUnauthorized(await machine({ bearer: server.operatorToken }))
  })

  it("checks the publicId only for an authenticated caller", async () => {
    expectUnauthorized(await request(server, "GET", "/api/v1/trust/DET-V1-NO-SUCH-0001/machine"))
    expectProblem(await request(server, "GET", "/api/v1/trust/DET-V1-NO-SUCH-0001/machine", { bearer: readKey }), 404, "determination-not-found")
  })
})

describe("operator endpoints refuse everything but the operator token", () => {
  const operatorCalls = (keyId: string) => [
    ["POST", "/api/v1/api-keys", { tenant_id: "tenant-x", name: "x", scopes: ["trust:read"] }],
    ["GET", "/api/v1/api-keys", undefined],
    ["GET", "/api/v1/api-keys?tenant_id=tenant-a", undefined],
    ["DELETE", `/api/v1/api-keys/${keyId}`, undefined],
    ["PUT", `/api/v1/determinations/${id}`, determinationBody(Date.now() - DAY_MS, { tier: "T4" })]
  ] as const

  it("answers 401 to an API key, even one with every scope", async () => {
    const allScopes = await createKey(server, Scopes)
    const victim = await createKey(server, ["trust:read"])
    for (const [method, path, body] of operatorCalls(victim.key_id)) {
      expectUnauthorized(await request(server, method, path, { bearer: allScopes.api_key, ...(body === undefined ? {} : { body }) }))
    }
    // Nothing happened: the victim key still works and the determination is unchanged.
    expect((await machine({ bearer: victim.api_key })).status).toBe(200)
    expect((await machine({ bearer: readKey })).body.determination.tier).toBe("T2")
    const keys = (await listKeys("tenant-x")).body.keys
    expect(keys).toEqual([])
  })

  it("answers 401 without credentials and with a wrong operator token", async () => {
    for (const bearer of [undefined, "wrong-operator-token-0123456789abcdef", server.operatorToken + "x", server.operatorToken.slice(0, -1)]) {
      for (const [method, path, body] of operatorCalls("key_01ARZ3NDEKTSV4RRFFQ69G5FAV")) {
        expectUnauthorized(await request(server, method, path, {
          ...(bearer === undefined ? {} : { bearer }), ...(body === undefined ? {} : { body })
        }))
      }
    }
  })
})

describe("API key provisioning (operator)", () => {
  it("creates a key: 201, the plaintext shown once, the fields and defaults of docs/API.md §7.12", async () => {
    const before = server.clock.currentTimeMillisUnsafe()
    const reply = await createKeyReply({ tenant_id: "tenant-prov", name: "provisioning test", scopes: ["trust:read", "receipt:write"] })
    const after = server.clock.currentTimeMillisUnsafe()
    expect(reply.status, reply.text).toBe(201)
    expect(reply.headers.get("content-type")).toMatch(/^application\/json\b/)
    const key = reply.body
    expect(Object.keys(key).sort()).toEqual([
      "api_key", "created_at", "daily_quota", "expires_at", "key_id", "key_prefix", "name", "rate_limit_per_minute", "scopes", "tenant_id"
    ])
    expect(key.key_id).toMatch(/^key_[0-9A-HJKMNP-TV-Z]{26}$/)
    expect(key.api_key).toMatch(/^pv_live_[0-9A-Za-z]{38}$/)
    expect(isWellFormedApiKey(key.api_key)).toBe(true)
    expect(key.key_prefix).toBe(key.api_key.slice(0, 12))
    expect(key.tenant_id).toBe("tenant-prov")
    expect(key.name).toBe("provisioning test")
    expect([...key.scopes].sort()).toEqual(["receipt:write", "trust:read"])
    expect(key.rate_limit_per_minute).toBe(600)
    expect(key.daily_quota).toBe(100_000)
    expect(key.expires_at).toBeNull()
    expect(key.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(Date.parse(key.created_at)).toBeGreaterThanOrEqual(before - 1)
    expect(Date.parse(key.created_at)).toBeLessThanOrEqual(after + 1)
    expect((await machine({ bearer: key.api_key })).status).toBe(200)
  })

  it("keeps the given limits and expiry, with the expiry in the timestamp form of docs/API.md §2", async () => {
    const reply = await createKeyReply({
      tenant_id: "tenant-prov", name: "limited", scopes: ["trust:read"],
      rate_limit_per_minute: 5, daily_quota: 50, expires_at: "2999-01-01T00:00:00Z"
    })
    expect(reply.status, reply.text).toBe(201)
    expect(reply.body).toMatchObject({ rate_limit_per_minute: 5, daily_quota: 50, expires_at: "2999-01-01T00:00:00.000Z" })
  })

  it("issues a different key every time", async () => {
    const a = await createKey(server, ["trust:read"])
    const b = await createKey(server, ["trust:read"])
    expect(a.api_key).not.toBe(b.api_key)
    expect(a.key_id).not.toBe(b.key_id)
  })

  it("lists keys, all or one tenant's, never with the secret or its hash", async () => {
    const a = await createKey(server, ["trust:read"], { tenant_id: "tenant-list-a", name: "a" })
    const b = await createKey(server, ["receipt:read"], { tenant_id: "tenant-list-b", name: "b" })
    const all = await listKeys()
    expect(all.status).toBe(200)
    const ids = all.body.keys.map((k: { key_id: string }) => k.key_id)
    expect(ids).toEqual(expect.arrayContaining([a.key_id, b.key_id]))
    for (const listed of all.body.keys) {
      expect(Object.keys(listed).sort()).toEqual([
        "created_at", "daily_quota", "expires_at", "key_id", "key_prefix", "last_used_at", "name", "rate_limit_per_minute",
        "revoked_at", "scopes", "tenant_id"
      ])
    }
    for (const secret of [a.api_key, b.api_key, readKey]) {
      expect(all.text).not.toContain(secret)
      expect(all.text).not.toContain(secret.slice(12))
      expect(all.text).not.toContain(hashApiKey(secret))
    }
    expect(all.text).not.toMatch(/api_key"|key_hash/)

    const onlyB = await listKeys("tenant-list-b")
    expect(onlyB.status).toBe(200)
    expect(onlyB.body.keys).toHaveLength(1)
    expect(onlyB.body.keys[0]).toMatchObject({
      key_id: b.key_id, tenant_id: "tenant-list-b", name: "b", scopes: ["receipt:read"],
      key_prefix: b.api_key.slice(0, 12), rate_limit_per_minute: 600, daily_quota: 100_000,
      expires_at: null, revoked_at: null
    })
    expect((await listKeys("tenant-nobody")).body.keys).toEqual([])
  })

  it("revokes: 204 with no body, shown as revoked in the list, 404 for an unknown key", async () => {
    const key = await createKey(server, ["trust:read"], { tenant_id: "tenant-revoke" })
    const revoked = await request(server, "DELETE", `/api/v1/api-keys/${key.key_id}`, asOperator(server))
    expect(revoked.status).toBe(204)
    expect(revoked.text).toBe("")
    const [listed] = (await listKeys("tenant-revoke")).body.keys
    expect(listed.key_id).toBe(key.key_id)
    expect(listed.revoked_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expectUnauthorized(await eventuallyUnauthorized(key.api_key))

    const unknown = await request(server, "DELETE", "/api/v1/api-keys/key_01ARZ3NDEKTSV4RRFFQ69G5FAV", asOperator(server))
    expectProblem(unknown, 404, "not-found")
    expectProblem(await request(server, "DELETE", "/api/v1/api-keys/nonsense", asOperator(server)), 404, "not-found")
  })

  it("refuses invalid requests with 422 naming the field, and stores nothing", async () => {
    const valid = { tenant_id: "tenant-invalid", name: "n", scopes: ["trust:read"] }
    const past = new Date(server.clock.currentTimeMillisUnsafe() - 60_000).toISOString()
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [{ ...valid, scopes: [] }, "/scopes"],
      [{ ...valid, scopes: ["trust:write"] }, "/scopes/0"],
      [{ ...valid, scopes: ["trust:read", "admin"] }, "/scopes/1"],
      [{ ...valid, scopes: "trust:read" }, "/scopes"],
      [{ ...valid, scopes: ["trust:read", "trust:read"] }, "/scopes"],
      [{ ...valid, extra: 1 }, "/extra"],
      [{ ...valid, key_hash: "a".repeat(64) }, "/key_hash"],
      [{ ...valid, expires_at: past }, "/expires_at"],
      [{ ...valid, expires_at: "tomorrow" }, "/expires_at"],
      [{ ...valid, rate_limit_per_minute: 0 }, "/rate_limit_per_minute"],
      [{ ...valid, rate_limit_per_minute: 1.5 }, "/rate_limit_per_minute"],
      [{ ...valid, daily_quota: "many" }, "/daily_quota"],
      [{ name: "n", scopes: ["trust:read"] }, "/tenant_id"],
      [{ tenant_id: "tenant-invalid", scopes: ["trust:read"] }, "/name"],
      [{ tenant_id: "tenant-invalid", name: "n" }, "/scopes"],
      [{ ...valid, name: "" }, "/name"],
      [{ ...valid, tenant_id: "" }, "/tenant_id"]
    ]
    for (const [body, pointer] of cases) {
      const reply = await createKeyReply(body)
      expectProblem(reply, 422, "validation-failed")
      expect(pointersOf(reply), JSON.stringify(body)).toContain(pointer)
    }
    // An empty list is wrong at /scopes itself, not at a /scopes/0 that is not there.
    expect(pointersOf(await createKeyReply({ ...valid, scopes: [] }))).toEqual(["/scopes"])
    expect((await listKeys("tenant-invalid")).body.keys).toEqual([])
  })
})

describe("key expiry", () => {
  it("answers 401 once a key's expires_at has passed on the server's clock, and not before", async () => {
    // An hour ahead on the server's clock: however slowly this runs, the key is valid until the clock is moved.
    const expiresAt = server.clock.currentTimeMillisUnsafe() + 3_600_000
    const key = await createKey(server, ["trust:read"], { expires_at: new Date(expiresAt).toISOString() })
    expect((await machine({ bearer: key.api_key })).status).toBe(200)
    await withShiftedClock(server.clock, async (shift) => {
      shift.to(expiresAt - 10_000)
      expect((await machine({ bearer: key.api_key })).status).toBe(200)
      shift.to(expiresAt + 1_000)
      expectUnauthorized(await machine({ bearer: key.api_key }))
      expect((await machine({ bearer: readKey })).status).toBe(200)
    })
    // The clock is back: the key works again (expiry is a comparison, not a change to the key).
    expect((await machine({ bearer: key.api_key })).status).toBe(200)
  })
})

describe("x-pv-internal-token with PV_INTERNAL_TOKEN set", () => {
  it("answers 401 to a wrong value on every kind of endpoint", async () => {
    for (const value of ["wrong", internalToken + "x", internalToken.slice(0, -1), ""]) {
      const headers = { "x-pv-internal-token": value }
      expectUnauthorized(await machine({ bearer: readKey, headers }))
      expectUnauthorized(await request(server, "GET", `/api/v1/trust/${id}/human`, { headers }))
      expectUnauthorized(await request(server, "GET", "/api/v1/api-keys", { ...asOperator(server), headers }))
    }
  })

  it("changes nothing when the value is right or the header is absent", async () => {
    const headers = { "x-pv-internal-token": internalToken }
    expect((await machine({ bearer: readKey, headers })).status).toBe(200)
    expect((await machine({ bearer: readKey })).status).toBe(200)
    expect((await request(server, "GET", `/api/v1/trust/${id}/human`, { headers })).status).toBe(200)
    expect((await request(server, "GET", "/api/v1/api-keys", { ...asOperator(server), headers })).status).toBe(200)
  })

  it("never grants access on its own", async () => {
    const headers = { "x-pv-internal-token": internalToken }
    expectUnauthorized(await machine({ headers }))
    expectUnauthorized(await request(server, "GET", "/api/v1/api-keys", { headers }))
    const noScope = await createKey(server, ["receipt:read"])
    expectProblem(await machine({ bearer: noScope.api_key, headers }), 403, "insufficient-scope")
  })
})
