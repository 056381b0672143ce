import { Cause, Effect, Exit, Schema } from "effect"
import { HttpApi } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Api } from "../../src/app/Api.js"
import { Scopes } from "../../src/domain/ApiKey.js"
import { endpointKey } from "../support/authz/endpoints.js"
import { DAY_MS, determinationBody, relianceRequest } from "../support/fixtures.js"
import { asOperator, createKey, putDetermination, request, type RequestOptions } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * Success bodies go through their schemas: every GET endpoint of the HttpApi definition (src/app/Api.ts),
 * and POST /reliance-receipts, is called on a real server with a request that succeeds, and the 2xx body
 * must decode, strictly (no member the schema does not declare), with the success schema the definition
 * declares for that status. The endpoint list is generated from the definition, so a new GET endpoint
 * without a case below fails here.
 */

interface Declared {
  readonly key: string
  readonly group: string
  readonly name: string
  /** Status → the success schemas declared for it, as HttpApi holds them (JSON bodies as their JSON codec). */
  readonly successes: ReadonlyMap<number, ReadonlyArray<Schema.Top>>
}

const declared: ReadonlyArray<Declared> = (() => {
  const out: Array<Declared> = []
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group, successes }) =>
      out.push({ key: endpointKey(endpoint.method, endpoint.path), group: group.identifier, name: endpoint.identifier, successes })
  })
  return out
})()

/** Which endpoints need a case: every GET, and the receipt POST. */
const needsCase = (key: string) => key.startsWith("GET ") || key === "POST /api/v1/reliance-receipts"

interface Call {
  readonly method?: string
  readonly path: string
  readonly options?: RequestOptions
  /** The status a correct server answers this call with. */
  readonly status: number
}

type Case =
  /** Calls made in order; each must answer its status with a body its declared schema decodes. */
  | { readonly calls: () => Promise<ReadonlyArray<Call>> }
  /** The endpoint declares no success body and never succeeds: it answers `status` (checked). */
  | { readonly neverSucceeds: Call }
  /** A live stream (text/event-stream, never ending): its status, type and first message are checked. */
  | { readonly streams: () => Call }

const publicId = "DET-V1-SUCCESS-SCHEMAS-0001"
let server: TestServer
let key = ""
let receiptId = ""

/** The published tree size, from the signed checkpoint (its second line). */
const treeSize = async (): Promise<number> => {
  const reply = await request(server, "GET", "/api/v1/log/checkpoint")
  expect(reply.status, reply.text).toBe(200)
  return Number(reply.text.split("\n")[1])
}

/**
 * Waits until the log has integrated every write and published a checkpoint of all of it (the integrator
 * runs on its own), so a receipt's proof exists and a partial tile of the published width stays served.
 */
const settledTreeSize = async (): Promise<number> => {
  const deadline = Date.now() + 10_000
  for (;;) {
    const [counts] = await server.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ readonly pending: number; readonly entries: number }>`
        SELECT (SELECT count(*) FROM log_pending)::int AS pending, (SELECT count(*) FROM log_entries)::int AS entries`))
    const size = await treeSize()
    if (counts !== undefined && counts.pending === 0 && size === counts.entries && size > 0) return size
    if (Date.now() > deadline) throw new Error(`the log did not settle within 10 s (${JSON.stringify(counts)}, checkpoint ${size})`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const apiCases: Readonly<Record<string, Case>> = {
  "GET /healthz": { calls: async () => [{ path: "/healthz", status: 200 }] },
  "GET /readyz": { calls: async () => [{ path: "/readyz", status: 200 }] },
  "GET /api/v1/trust/{}/machine": {
    calls: async () => [{ path: `/api/v1/trust/${publicId}/machine`, options: { bearer: key }, status: 200 }]
  },
  "GET /api/v1/trust/{}/human": { calls: async () => [{ path: `/api/v1/trust/${publicId}/human`, status: 200 }] },
  "GET /api/v1/api-keys": {
    calls: async () => [{ path: "/api/v1/api-keys?tenant_id=tenant-a", options: asOperator(server), status: 200 }]
  },
  "POST /api/v1/reliance-receipts": {
    // The first stores the receipt (201), the same request again is the idempotent replay (200).
    calls: async () => {
      const call = { method: "POST", path: "/api/v1/reliance-receipts", options: { bearer: key, body: relianceRequest(publicId, "schemas:post") } }
      return [{ ...call, status: 201 }, { ...call, status: 200 }]
    }
  },
  "GET /api/v1/reliance-receipts/{}": {
    calls: async () => [{ path: `/api/v1/reliance-receipts/${receiptId}`, options: { bearer: key }, status: 200 }]
  },
  "GET /api/v1/reliance-receipts/{}/proof": {
    calls: async () => {
      await settledTreeSize()
      return [{ path: `/api/v1/reliance-receipts/${receiptId}/proof`, options: { bearer: key }, status: 200 }]
    }
  },
  "GET /api/v1/reliance-receipts/{}/tlog-proof": {
    calls: async () => {
      await settledTreeSize()
      return [{ path: `/api/v1/reliance-receipts/${receiptId}/tlog-proof`, options: { bearer: key }, status: 200 }]
    }
  },
  "GET /api/v1/reliance-receipts/{}/cose-receipt": {
    calls: async () => {
      await settledTreeSize()
      return [{ path: `/api/v1/reliance-receipts/${receiptId}/cose-receipt`, options: { bearer: key }, status: 200 }]
    }
  },
  "GET /api/v1/reliance-receipts/{}/transparent-statement": {
    calls: async () => {
      await settledTreeSize()
      return [{ path: `/api/v1/reliance-receipts/${receiptId}/transparent-statement`, options: { bearer: key }, status: 200 }]
    }
  },
  "GET /api/v1/policy": { calls: async () => [{ path: "/api/v1/policy", options: { bearer: key }, status: 200 }] },
  "GET /api/v1/mcp": { neverSucceeds: { path: "/api/v1/mcp", options: { bearer: key }, status: 405 } },
  "GET /api/v1/events": {
    calls: async () => [{ path: `/api/v1/events?public_id=${publicId}`, options: { bearer: key }, status: 200 }]
  },
  "GET /api/v1/events/stream": {
    streams: () => ({ path: `/api/v1/events/stream?public_id=${publicId}`, options: { bearer: key }, status: 200 })
  },
  "GET /api/v1/subscriptions": {
    calls: async () => [
      { path: "/api/v1/subscriptions", options: { bearer: key }, status: 200 },
      { path: "/api/v1/subscriptions?limit=1", options: { bearer: key }, status: 200 }
    ]
  },
  "GET /api/v1/subscriptions/{}": {
    calls: async () => {
      const made = await request(server, "POST", "/api/v1/subscriptions", { bearer: key, body: { public_id: publicId } })
      return [{ path: `/api/v1/subscriptions/${made.body.subscription_id}`, options: { bearer: key }, status: 200 }]
    }
  },
  "GET /api/v1/subscriptions/{}/attempts": {
    calls: async () => {
      const made = await request(server, "POST", "/api/v1/subscriptions", { bearer: key, body: { public_id: publicId } })
      return [{ path: `/api/v1/subscriptions/${made.body.subscription_id}/attempts?limit=1`, options: { bearer: key }, status: 200 }]
    }
  },
  "GET /api/v1/events/keys": { calls: async () => [{ path: "/api/v1/events/keys", status: 200 }] },
  "GET /api/v1/webhooks/signing-key": { calls: async () => [{ path: "/api/v1/webhooks/signing-key", status: 200 }] },
  "GET /api/v1/log/checkpoint": { calls: async () => [{ path: "/api/v1/log/checkpoint", status: 200 }] },
  "GET /api/v1/log/key": { calls: async () => [{ path: "/api/v1/log/key", status: 200 }] },
  "GET /api/v1/log/policy": { calls: async () => [{ path: "/api/v1/log/policy", status: 200 }] },
  "GET /api/v1/log/tile/*": {
    // The published tree is small: its level-0 hash tile and its entry bundle are partial tiles of its width.
    calls: async () => {
      const size = await settledTreeSize()
      return [
        { path: `/api/v1/log/tile/0/000.p/${size}`, status: 200 },
        { path: `/api/v1/log/tile/entries/000.p/${size}`, status: 200 }
      ]
    }
  },
  "GET /api/v1/log/proof/inclusion": {
    calls: async () => [{ path: `/api/v1/log/proof/inclusion?index=0&tree_size=${await settledTreeSize()}`, status: 200 }]
  },
  "GET /api/v1/log/proof/consistency": {
    calls: async () => [{ path: `/api/v1/log/proof/consistency?first=1&second=${await settledTreeSize()}`, status: 200 }]
  }
}

/** The root /log alias serves the log's own definitions again at /log/…: each log case, called there. */
const rootLogCases = Object.fromEntries(
  Object.entries(apiCases).flatMap(([key, test]): Array<[string, Case]> =>
    key.startsWith("GET /api/v1/log/") && "calls" in test
      ? [[key.replace("/api/v1/log/", "/log/"), {
        calls: async () => (await test.calls()).map((call) => ({ ...call, path: call.path.replace("/api/v1/log/", "/log/") }))
      }]]
      : []
  )
)
const cases: Readonly<Record<string, Case>> = { ...apiCases, ...rootLogCases }

/** The body as the declared schema's encoded side: JSON parsed, text as text, anything else as bytes. */
const bodyOf = async (response: Response): Promise<unknown> => {
  const contentType = response.headers.get("content-type") ?? ""
  if (/^application\/json\b/.test(contentType)) return JSON.parse(await response.text())
  if (/^text\//.test(contentType)) return response.text()
  return new Uint8Array(await response.arrayBuffer())
}

/** Undefined when one of the schemas decodes the body strictly; otherwise every schema's failure. */
const mismatch = async (schemas: ReadonlyArray<Schema.Top>, body: unknown): Promise<string | undefined> => {
  const failures: Array<string> = []
  for (const schema of schemas) {
    const exit = await Effect.runPromiseExit(
      Schema.decodeUnknownEffect(schema as Schema.Codec<unknown, unknown>)(body, { onExcessProperty: "error", errors: "all" })
    )
    if (Exit.isSuccess(exit)) return undefined
    failures.push(Cause.pretty(exit.cause))
  }
  return failures.join("\n")
}

beforeAll(async () => {
  server = await startTestServer()
  const body = determinationBody(Date.now() - DAY_MS, {
    // An open-ended member of the document, so its schema (a JSON object) is exercised too.
    purchase: { order: "po-1", lines: [{ sku: "robot-arm", quantity: 2, gift: false, note: null }] }
  })
  const put = await putDetermination(server, publicId, body)
  expect(put.status, put.text).toBe(201)
  key = (await createKey(server, Scopes, { name: "success schemas" })).api_key
  const created = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: key, body: relianceRequest(publicId, "schemas:setup") })
  expect(created.status, created.text).toBe(201)
  receiptId = created.body.receipt_id
})
afterAll(() => server?.close())

describe(`success bodies decode with their declared schemas (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("has a case for every GET endpoint of the definition and the receipt POST, and none for an endpoint it lacks", () => {
    expect(declared.length).toBeGreaterThanOrEqual(20)
    const missing = declared.filter((e) => needsCase(e.key) && cases[e.key] === undefined).map((e) => `${e.key} (${e.group}.${e.name})`)
    expect(missing, "endpoints without a case in successSchemas.http.test.ts").toEqual([])
    const defined = new Set(declared.map((e) => e.key))
    expect(Object.keys(cases).filter((key) => !defined.has(key)), "cases for endpoints the definition lacks").toEqual([])
  })

  for (const endpoint of declared.filter((e) => needsCase(e.key))) {
    const name = `${endpoint.key} (${endpoint.group}.${endpoint.name})`
    it(name, async () => {
      const test = cases[endpoint.key]
      if (test === undefined) return expect.fail(`${name} has no case (see the first test)`)
      if ("neverSucceeds" in test) {
        // Nothing to decode: the definition declares no success body (HttpApi's default, 204 No Content).
        expect([...endpoint.successes.keys()], name).toEqual([204])
        const reply = await request(server, test.neverSucceeds.method ?? "GET", test.neverSucceeds.path, test.neverSucceeds.options)
        expect(reply.status, `${name}: ${reply.text.slice(0, 300)}`).toBe(test.neverSucceeds.status)
        return
      }
      if ("streams" in test) {
        const call = test.streams()
        const reply = await request(server, "GET", call.path, call.options)
        expect(reply.status, `${name}: ${reply.text.slice(0, 300)}`).toBe(call.status)
        expect(reply.headers.get("content-type")).toMatch(/^text\/event-stream/)
        // The first message of a stream is its comment line; events follow as `id`, `event` and `data` lines.
        expect(reply.text).toMatch(/^: /)
        return
      }
      for (const call of await test.calls()) {
        const method = call.method ?? "GET"
        const options = call.options ?? {}
        const headers: Record<string, string> = { ...options.headers }
        if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`
        if (options.body !== undefined) headers["content-type"] = "application/json"
        const response = await fetch(server.baseUrl + call.path, {
          method,
          headers,
          ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
        })
        const label = `${name}: ${method} ${call.path}`
        if (response.status !== call.status) {
          expect.fail(`${label} answered ${response.status}, not ${call.status}: ${(await response.text()).slice(0, 500)}`)
        }
        const schemas = endpoint.successes.get(response.status)
        if (schemas === undefined) {
          expect.fail(`${label} answered ${response.status}, a status its definition declares no success for ([${[...endpoint.successes.keys()].join(", ")}])`)
        }
        const problem = await mismatch(schemas, await bodyOf(response))
        if (problem !== undefined) expect.fail(`${label}: the ${response.status} body does not decode with the declared success schema\n${problem}`)
      }
    })
  }

  it("sends a stored receipt byte for byte as stored, through its schema (GET, and POST's replay with `idempotent` added)", async () => {
    const [stored] = await server.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ readonly text: string }>`SELECT receipt::text AS text FROM reliance_receipts WHERE receipt_id = ${receiptId}`))
    expect(stored).toBeDefined()
    const got = await request(server, "GET", `/api/v1/reliance-receipts/${receiptId}`, { bearer: key })
    expect(got.status, got.text).toBe(200)
    expect(got.text).toBe(stored!.text)
    const replay = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: key, body: relianceRequest(publicId, "schemas:setup") })
    expect(replay.status, replay.text).toBe(200)
    expect(replay.text).toBe(`${stored!.text.slice(0, -1)},"idempotent":true}`)
  })
})
