import { ulid } from "ulid"
import { expect } from "vitest"
import { adminUrl, createScratchDatabase } from "../support/databases.js"
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.js"
import { createMigratedDatabase } from "../support/templates.js"
import { expectProblem } from "../support/http.js"
import { childOperatorToken, Deployment, type DeploymentKind, prebuiltMain } from "../support/childServer.js"
import { determinationBody, DAY_MS } from "../support/fixtures.js"
import { answer, type Answer } from "./wire.js"

/** The databases the fault suite runs on: embedded always, PostgreSQL when vitest.config.ts found it. */
export const postgresAvailable = process.env.PV_FAULTS_POSTGRES === "1"
export const databaseKinds: ReadonlyArray<DeploymentKind> = postgresAvailable ? ["embedded", "postgres"] : ["embedded"]

export const allScopes = ["trust:read", "receipt:read", "receipt:write", "actionability:read"]

/** A key of tenant-a with limits far above anything a test sends. */
export const provisionKey = async (baseUrl: string, scopes: ReadonlyArray<string> = allScopes): Promise<string> => {
  const reply = await answer(baseUrl, "POST", "/api/v1/api-keys", {
    bearer: childOperatorToken,
    body: { tenant_id: "tenant-a", name: "faults", scopes, rate_limit_per_minute: 1_000_000, daily_quota: 1_000_000_000 }
  })
  if (reply.status !== 201) throw new Error(`key creation failed: ${reply.status} ${reply.text}`)
  return reply.body.api_key
}

/** CURRENT for 80 days from a day ago: no freshness transition (and no sweep event) during a test. */
export const asOf = Date.now() - DAY_MS

export const determination = (revision: number) =>
  determinationBody(asOf, { why_this_tier: [`Registry identity verified (revision ${revision})`] })

export const putDetermination = (baseUrl: string, publicId: string, body: unknown, timeoutMs?: number) =>
  answer(baseUrl, "PUT", `/api/v1/determinations/${publicId}`, {
    bearer: childOperatorToken,
    body,
    ...(timeoutMs === undefined ? {} : { timeoutMs })
  })

/** The 7 caller fields of a receipt create. */
export const receiptBody = (principal: string, subject: string) => ({
  tenant_id: "tenant-a",
  organization: "Fault Injection Buyers",
  principal,
  subject_public_id: subject,
  purpose_id: "supplier-onboarding",
  requested_action: "approve",
  claim_scope: ["identity"]
})

/** docs/API.md §13: a dependency outage is 503 `unavailable` with Retry-After. */
export const expectUnavailable = (reply: Answer) => {
  expectProblem(reply, 503, "unavailable")
  expect(reply.headers.get("retry-after") ?? "(no Retry-After header)", "Retry-After on 503 unavailable").toMatch(/^\d+$/)
}

/** docs/API.md §13: beyond PV_MAX_IN_FLIGHT, 503 `overloaded` with Retry-After. */
export const expectOverloaded = (reply: Answer) => {
  expectProblem(reply, 503, "overloaded")
  expect(reply.headers.get("retry-after") ?? "(no Retry-After header)", "Retry-After on 503 overloaded").toMatch(/^\d+$/)
}

/** Every event of a determination's chain (all pages) and the head the server reports. */
export const eventChain = async (baseUrl: string, key: string, publicId: string) => {
  const events: Array<any> = []
  let after = 0
  let head: { sequence: number; eventHash: string | null } | undefined
  for (;;) {
    const page = await answer(baseUrl, "GET", `/api/v1/events?public_id=${publicId}&after=${after}&limit=1000`, { bearer: key, timeoutMs: 10_000 })
    if (page.status !== 200) throw new Error(`events of ${publicId}: ${page.status} ${page.text}`)
    events.push(...page.body.events)
    head = page.body.head
    if (page.body.next_after === null || page.body.next_after === undefined) break
    after = page.body.next_after
  }
  return { events, head: head! }
}

export const eventKeys = async (baseUrl: string) => {
  const reply = await answer(baseUrl, "GET", "/api/v1/events/keys")
  if (reply.status !== 200) throw new Error(`JWKS: ${reply.status} ${reply.text}`)
  return reply.body
}

/**
 * A scratch database on the test PostgreSQL, and its URL through `proxy`: a copy of the migrated template, as
 * Deployment.create makes (the faults under test come after the start, which then applies no migration),
 * or an empty one for a build made elsewhere (PV_FAULTS_MAIN), which may have other migrations.
 */
export const proxiedDatabase = async (proxy: TcpProxy) => {
  const scratch = prebuiltMain === undefined ? await createMigratedDatabase() : await createScratchDatabase()
  const url = new URL(scratch.url)
  url.hostname = "127.0.0.1"
  url.port = String(proxy.port)
  return { url: url.toString(), drop: scratch.drop }
}

/**
 * A PostgreSQL deployment whose every connection goes through a TCP proxy of its own (`proxy.setMode` breaks
 * the network on purpose), on a fresh scratch database; `dispose` stops the processes, the proxy, and drops it.
 */
export interface ProxiedDeployment {
  readonly proxy: TcpProxy
  readonly deployment: Deployment
  readonly dispose: () => Promise<void>
}

export const proxiedDeployment = async (env: Record<string, string> = {}): Promise<ProxiedDeployment> => {
  const proxy = await startTcpProxy(postgresTarget())
  try {
    const database = await proxiedDatabase(proxy)
    const deployment = await Deployment.create("postgres", { databaseUrl: database.url, env })
    return {
      proxy,
      deployment,
      dispose: async () => {
        await deployment.dispose()
        await proxy.close()
        await database.drop()
      }
    }
  } catch (error) {
    await proxy.close()
    throw error
  }
}

export const postgresTarget = () => {
  const url = new URL(adminUrl())
  return { host: url.hostname, port: Number(url.port || 5432) }
}

/** A well-formed receipt id (rr_ + ULID) that was never issued, so only the database can answer for it. */
export const unseenReceiptId = () => `rr_${ulid()}`

