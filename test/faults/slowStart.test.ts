import { afterAll, describe, expect, it } from "vitest"
import { sleep } from "../support/childServer.js"
import { postgresAvailable, type ProxiedDeployment, proxiedDeployment } from "./service.js"
import { answer, pollUntil } from "./wire.js"

/**
 * A database slow to accept its first connections delays the start instead of failing it (platform/PgPool.ts:
 * the circuit breaker is armed by the probe's first answer). PostgreSQL behind the fault suite's TCP proxy
 * (test/support/tcpProxy.ts), black-holed for 2 s from its first connection attempt: far longer than the probe's 750 ms limit,
 * well within the 10 s connect time-out given here. Before the breaker waited for a first answer, the probe's
 * first time-out destroyed the start's own connection and the process exited 1 (seen on a loaded machine,
 * where a slow first connection was enough).
 */
describe.skipIf(!postgresAvailable)("a database slow to answer at start (postgres)", () => {
  let setup: ProxiedDeployment | undefined
  afterAll(() => setup?.dispose())

  it("the start waits for it, then serves; once it has answered, the circuit opens on an outage as before", async () => {
    setup = await proxiedDeployment({ PV_DB_CONNECT_TIMEOUT_MS: "10000" })
    const { proxy, deployment } = setup
    await proxy.setMode("blackhole")
    const child = deployment.spawn()
    // The black hole holds for 2 s from the service's first connection attempt (on a loaded machine the
    // process may take longer than that just to reach its first connect, which proves nothing).
    await pollUntil("the service is trying to connect", 30_000, async () => (proxy.accepted > 0 || child.exited !== undefined ? true : undefined))
    await sleep(2_000)
    expect(child.exited, `the service exited while the database was slow:\n${child.stdout}\n${child.stderr}`).toBeUndefined()
    expect(proxy.accepted, "the service is trying to connect").toBeGreaterThan(0)
    await proxy.setMode("forward")
    const baseUrl = await child.waitForBanner(30_000)
    const ready = await answer(baseUrl, "GET", "/readyz")
    expect(ready.status, ready.text).toBe(200)

    // Armed: a black hole now opens the circuit within the probe's limit (docs/API.md §13: 503 within 2 s).
    await proxy.setMode("blackhole")
    const open = await pollUntil("the circuit opens", 5_000, async () => {
      const metrics = await answer(baseUrl, "GET", "/metrics")
      return /^pv_db_circuit_open\s+1\b/m.test(metrics.text) ? true : undefined
    })
    expect(open).toBe(true)
    const refused = await answer(baseUrl, "GET", "/readyz")
    expect(refused.status).toBe(503)
    await proxy.setMode("forward")
    await pollUntil("ready again", 10_000, async () => ((await answer(baseUrl, "GET", "/readyz")).status === 200 ? true : undefined))
    expect(child.exited).toBeUndefined()
  })
})
