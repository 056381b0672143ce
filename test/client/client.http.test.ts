import { Effect, Result } from "effect"
import { FetchHttpClient } from "effect/http"
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest"
import * as client from "../../src/client/index.js"
import {
  DeterminationNotFound,
  IdempotencyConflict,
  InsufficientScope,
  NotFound,
  makeTrustClient,
  makeTrustHttpClient,
  ProhibitedField,
  RateLimited,
  ReceiptNotFound,
  Unauthorized,
  ValidationFailed,
  problemCatalog,
  problemFromDocument,
  verifyEventChain,
  verifyReceipt,
  verifyReceiptBundle,
  verifyReceiptDigest,
  type ActionabilityEvaluation,
  type CreatedRelianceReceipt,
  type EventPage,
  type MachineTrustResponse,
  type PolicyView,
  type ProblemError,
  type RelianceReceipt,
  type RelianceRequestInput,
  type TrustClient
} from "../../src/client/index.js"
import { Api } from "../../src/app/Api.js"
import { DAY_MS, determinationBody, relianceRequest } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { type Receiver, startReceiver } from "../support/receiver.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { loopbackWebhookConfig, until } from "../support/webhookHttp.js"

/**
 * The typed client of `pv-trust-service/client` (src/client/http.ts) against the real server: every main
 * operation decodes what the service sends, unchanged, and every problem comes back as its class.
 */
let server: TestServer
let trust: TrustClient
let keys: { all: string; trustOnly: string; limited: string }
const subject = "DET-V1-CLIENT-0001"

const requestFor = (principal: string, overrides: Partial<RelianceRequestInput> = {}): RelianceRequestInput =>
  relianceRequest(subject, principal, overrides) as RelianceRequestInput

/** The rejection of a promise (fails the test when it resolves). */
const rejectionOf = async (promise: Promise<unknown>): Promise<unknown> => {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error("expected a rejection")
}

beforeAll(async () => {
  server = await startTestServer()
  const scopes = ["trust:read", "receipt:write", "receipt:read", "actionability:read"]
  keys = {
    all: (await createKey(server, scopes)).api_key,
    trustOnly: (await createKey(server, ["trust:read"])).api_key,
    limited: (await createKey(server, scopes, { rate_limit_per_minute: 1 })).api_key
  }
  expect((await putDetermination(server, subject, determinationBody(Date.now() - DAY_MS, { tier: "T3" }))).status).toBe(201)
  trust = makeTrustClient({ baseUrl: server.baseUrl, apiKey: keys.all })
})
afterAll(() => server?.close())

describe(`typed client (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("has a method for every endpoint of the HttpApi definition", () => {
    const endpoints = Object.values(Api.groups).flatMap((group) =>
      Object.keys(group.endpoints).map((name) => [group.identifier, name] as const))
    expect(endpoints.length).toBeGreaterThan(20)
    for (const [group, name] of endpoints) {
      expect(typeof (trust.api as unknown as Record<string, Record<string, unknown>>)[group]?.[name], `${group}.${name}`).toBe("function")
    }
  })

  it("resolves machine and human trust to the documents the service sends", async () => {
    const raw = await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: keys.all })
    const machine = await trust.machineTrust(subject)
    expect(machine).toEqual(raw.body)
    expect(await makeTrustClient({ baseUrl: server.baseUrl }).humanTrust(subject)).toEqual(raw.body)
    expect(client.trustStateDigestOf(machine)).toBe(raw.headers.get("etag")?.replaceAll('"', ""))
  })

  it("creates, replays, reads and proves a receipt; every check passes with pinned keys", async () => {
    const created = await trust.createReceipt(requestFor("client:create"))
    expect(created.idempotent).toBe(false)
    expect(verifyReceiptDigest(created)).toBe(true)
    const replay = await trust.createReceipt(requestFor("client:create"))
    expect(replay).toEqual({ ...created, idempotent: true })
    const stored = await trust.getReceipt(created.receipt_id)
    const raw = await request(server, "GET", `/api/v1/reliance-receipts/${created.receipt_id}`, { bearer: keys.all })
    expect(stored).toEqual(raw.body)
    expect(verifyReceipt(stored)).toBe(true)

    const bundle = await trust.receiptProof(created.receipt_id, { waitMs: 10_000 })
    expect(bundle.receipt).toEqual(stored)
    const verdict = verifyReceiptBundle(bundle, {
      verifierKey: (await trust.logKey()).verifier_key,
      receiptKeys: await trust.eventKeys()
    })
    expect(verdict).toMatchObject({ ok: true, keys: { verifier_key: "pinned", receipt_key: "pinned" } })
  })

  it("reads the event feed, policy and actionability as the service sends them", async () => {
    const page = await trust.events({ public_id: subject, after: 0, limit: 10 })
    const rawPage = await request(server, "GET", `/api/v1/events?public_id=${subject}&after=0&limit=10`, { bearer: keys.all })
    expect(page).toEqual(rawPage.body)
    expect(verifyEventChain(page.events, await trust.eventKeys(), { publicId: subject })).toMatchObject({ ok: true })

    const policy = await trust.policy()
    expect(policy).toEqual((await request(server, "GET", "/api/v1/policy", { bearer: keys.all })).body)

    const evaluation = await trust.evaluateActionability(requestFor("client:evaluate"))
    const rawEvaluation = await request(server, "POST", "/api/v1/actionability", { bearer: keys.all, body: requestFor("client:evaluate") })
    expect(evaluation).toEqual(rawEvaluation.body)
    expect(evaluation.policy_version).toBe(policy.policy_version)
  })

  it("rejects with the problem class the service named, declared by the endpoint or not", async () => {
    const missing = await rejectionOf(trust.machineTrust("DET-V1-CLIENT-9999"))
    expect(missing).toBeInstanceOf(DeterminationNotFound)
    expect(missing).toMatchObject({ _tag: "DeterminationNotFound", detail: expect.any(String) })

    expect(await rejectionOf(makeTrustClient({ baseUrl: server.baseUrl }).machineTrust(subject))).toBeInstanceOf(Unauthorized)
    const scope = await rejectionOf(makeTrustClient({ baseUrl: server.baseUrl, apiKey: keys.trustOnly }).getReceipt("rr_x"))
    expect(scope).toBeInstanceOf(InsufficientScope)
    expect((scope as InsufficientScope).scope).toBe("receipt:read")

    const prohibited = await rejectionOf(trust.createReceipt({ ...requestFor("client:prohibited"), decision: "ACTIONABLE" } as RelianceRequestInput))
    expect(prohibited).toBeInstanceOf(ProhibitedField)
    expect((prohibited as ProhibitedField).errors?.map((error) => error.pointer)).toEqual(["/decision"])

    await trust.createReceipt(requestFor("client:conflict"))
    expect(await rejectionOf(trust.createReceipt(requestFor("client:conflict", { organization: "Someone Else" }))))
      .toBeInstanceOf(IdempotencyConflict)
    expect(await rejectionOf(trust.receiptProof("rr_01J00000000000000000000000"))).toBeInstanceOf(ReceiptNotFound)

    // 429 is not among GET /machine's declared errors, and still comes back as its class with Retry-After.
    const limited = makeTrustClient({ baseUrl: server.baseUrl, apiKey: keys.limited })
    await limited.machineTrust(subject)
    const rateLimited = await rejectionOf(limited.machineTrust(subject))
    expect(rateLimited).toBeInstanceOf(RateLimited)
    expect((rateLimited as RateLimited).retry_after).toBeGreaterThan(0)
  })

  it("is an Effect client too: typed failures to catch by tag", async () => {
    const program = Effect.gen(function*() {
      const api = yield* makeTrustHttpClient({ baseUrl: server.baseUrl, apiKey: keys.all })
      const found = yield* api.trust.machine({ params: { publicId: subject }, headers: {} })
      const missing = yield* api.trust.machine({ params: { publicId: "DET-V1-CLIENT-9999" }, headers: {} }).pipe(
        Effect.catchTag("DeterminationNotFound", (error) => Effect.succeed(error.detail)),
        Effect.result
      )
      return { found, missing }
    }).pipe(Effect.provide(FetchHttpClient.layer))
    const { found, missing } = await Effect.runPromise(program)
    expect(found.determination.tier).toBe("T3")
    expect(Result.isSuccess(missing) && typeof missing.success).toBe("string")
  })

  it("exports every problem class, and maps documents by status and code", () => {
    for (const [tag, { code, status }] of Object.entries(problemCatalog)) {
      expect(typeof (client as Record<string, unknown>)[tag], tag).toBe("function")
      const error = problemFromDocument({ type: `urn:pv:problem:${code}`, title: "t", status, detail: "d", code }, { "retry-after": "2" })
      expect(error._tag === "Some" && error.value._tag, `${status} ${code}`).toBe(tag)
    }
    expect(problemFromDocument({ status: 418, code: "teapot", detail: "d" })._tag).toBe("None")
  })

  it("has the definition's types (checked by tsc)", () => {
    expectTypeOf(trust.machineTrust).returns.resolves.toEqualTypeOf<MachineTrustResponse>()
    expectTypeOf(trust.createReceipt).parameter(0).toEqualTypeOf<RelianceRequestInput>()
    expectTypeOf(trust.createReceipt).returns.resolves.toEqualTypeOf<CreatedRelianceReceipt>()
    expectTypeOf(trust.getReceipt).returns.resolves.toEqualTypeOf<RelianceReceipt>()
    expectTypeOf(trust.events).returns.resolves.toEqualTypeOf<EventPage>()
    expectTypeOf(trust.policy).returns.resolves.toEqualTypeOf<PolicyView>()
    expectTypeOf(trust.evaluateActionability).returns.resolves.toEqualTypeOf<ActionabilityEvaluation>()
    type MachineError = Effect.Error<ReturnType<typeof trust.api.trust.machine>>
    expectTypeOf<DeterminationNotFound>().toMatchTypeOf<MachineError>()
    expectTypeOf<ProblemError>().toMatchTypeOf<MachineError>()
  })
})

describe(`typed client: webhook attempts and redelivery (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  let hooks: TestServer
  let receiver: Receiver
  afterAll(async () => {
    await hooks?.close()
    await receiver?.close()
  })

  it("lists attempts as the service sends them and redelivers; a refusal is its problem class", async () => {
    receiver = await startReceiver()
    hooks = await startTestServer({ config: loopbackWebhookConfig() })
    const key = (await createKey(hooks, ["subscription:write", "trust:read"])).api_key
    const asOf = Date.now() - DAY_MS
    expect((await putDetermination(hooks, subject, determinationBody(asOf))).status).toBe(201)
    const hookClient = makeTrustClient({ baseUrl: hooks.baseUrl, apiKey: key })
    const made = await hookClient.subscribe({ public_id: subject, webhook_url: receiver.url("/client") })
    expect((await putDetermination(hooks, subject, determinationBody(asOf, { tier: "T4" }))).status).toBe(200)
    await receiver.waitFor(1, "/client")
    const page = await until("recorded", () => hookClient.attempts(made.subscription_id, { limit: 10 }), (p) => p.attempts.length === 1)
    expect(page).toEqual((await request(hooks, "GET", `/api/v1/subscriptions/${made.subscription_id}/attempts?limit=10`, { bearer: key })).body)
    expect(page.attempts[0]).toMatchObject({ sequence: 2, outcome: "delivered", status: 204 })

    const redone = await hookClient.redeliver(made.subscription_id, 1)
    expect(redone).toMatchObject({ subscription_id: made.subscription_id, status: "active" })
    expect((await receiver.waitFor(3, "/client")).map((r) => JSON.parse(r.body).event.sequence)).toEqual([2, 1, 2])
    const refused = await rejectionOf(hookClient.redeliver(made.subscription_id, 99))
    expect(refused).toBeInstanceOf(ValidationFailed)
    expect((refused as ValidationFailed).errors).toEqual([expect.objectContaining({ pointer: "/from_sequence" })])
    expect(await rejectionOf(hookClient.attempts("sub_01JZZZZZZZZZZZZZZZZZZZZZZZ"))).toBeInstanceOf(NotFound)
  })
})
