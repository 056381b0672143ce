import { afterAll, describe, it } from "vitest"
import { childOperatorToken, sleep } from "../support/childServer.js"
import type { ProxyMode } from "../support/tcpProxy.js"
import {
  determination, expectUnavailable, postgresAvailable, type ProxiedDeployment, provisionKey, proxiedDeployment, putDetermination, receiptBody,
  unseenReceiptId
} from "./service.js"
import { answer, type Answer, call, describeOutcome, pollUntil } from "./wire.js"

/**
 * docs/API.md §13, "Database outage": a request that needs the database fails within 2 s with 503
 * `unavailable` and Retry-After; nothing hangs and no process exits; /readyz 503; service resumes by itself
 * within 5 s of the database coming back. PostgreSQL only: the service reaches it through a TCP proxy
 * (test/support/tcpProxy.ts) that refuses connections or black-holes them.
 *
 * Which requests need the database: API keys are cached for 1 s and trust documents for up to 5 s, and a
 * receipt this instance has seen is answered from memory. So the requests under test are ones no cache can
 * answer: GET of a receipt id this instance never saw, PUT of a changed determination, POST of a receipt
 * for a new principal, and /readyz. Cached reads (the receipt created while warm, the trust document read
 * while warm) are also sent and logged: while the key is still cached they may be 200 from memory; once the
 * 1 s key cache lapses the key lookup needs the database, so they become 503 too. They must never hang.
 */

const budgetMs = 2_000

// The two faults run side by side (concurrent): each has its own proxy, scratch database and process, and an
// outage is ~4.5 s of mostly waiting, so one after the other they took twice as long. Each prints its slowest
// answer during the outage, its margin to the 2 s bound (measured side by side as one after the other: refuse
// under 0.8 s, blackhole 0.85 to 1.1 s, on a loaded machine). Concurrent tests assert with their own `expect`.
describe.skipIf(!postgresAvailable).concurrent.each(["refuse", "blackhole"] as const)("database outage: %s", (fault: ProxyMode) => {
  let setup: ProxiedDeployment | undefined
  afterAll(() => setup?.dispose())

  it("requests that need the database answer 503 unavailable + Retry-After within 2 s, healthz stays 200, no exit; back within 5 s after", async ({ expect }) => {
    setup = await proxiedDeployment()
    const { proxy, deployment } = setup
    const { child, baseUrl } = await deployment.start()
    const key = await provisionKey(baseUrl)
    const subject = "DET-V1-OUTAGE-0001"
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)
    const warm = await answer(baseUrl, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody("outage-warm", subject) })
    expect(warm.status, warm.text).toBe(201)
    expect((await answer(baseUrl, "GET", `/api/v1/trust/${subject}/machine`, { bearer: key })).status).toBe(200)

    let revision = 0
    let principal = 0
    const needsDatabase = (): Array<[string, () => Promise<Answer>]> => [
      ["GET unseen receipt", () => answer(baseUrl, "GET", `/api/v1/reliance-receipts/${unseenReceiptId()}`, { bearer: key })],
      ["PUT changed determination", () => answer(baseUrl, "PUT", `/api/v1/determinations/${subject}`, {
        bearer: childOperatorToken,
        body: determination(++revision)
      })],
      ["POST receipt, new principal", () => answer(baseUrl, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody(`outage-${fault}-${principal++}`, subject) })],
      ["GET /readyz", () => answer(baseUrl, "GET", "/readyz")]
    ]
    const cached = (): Array<[string, () => Promise<Answer>]> => [
      ["GET warm receipt (cached)", () => answer(baseUrl, "GET", `/api/v1/reliance-receipts/${warm.body.receipt_id}`, { bearer: key })],
      ["GET trust document (cached)", () => answer(baseUrl, "GET", `/api/v1/trust/${subject}/machine`, { bearer: key })]
    ]
    const failures: Array<string> = []
    let slowestMs = 0
    const observedCached: Array<string> = []
    // A request that got no answer within the client's 5 s: the outage loop stops early (it has failed).
    let hung = false
    const noteFailure = (line: string) => {
      failures.push(line)
      if (/no answer: timeout/.test(line)) hung = true
    }
    const expectFastUnavailable = async (label: string, send: () => Promise<Answer>) => {
      let seen = "no answer"
      try {
        const reply = await send()
        seen = `${reply.status} ${reply.body?.code ?? reply.text.slice(0, 80)} after ${Math.round(reply.elapsedMs)} ms, Retry-After ${reply.headers.get("retry-after")}`
        slowestMs = Math.max(slowestMs, reply.elapsedMs)
        expect(reply.elapsedMs, "answered within 2 s").toBeLessThan(budgetMs)
        if (label.endsWith("GET /readyz")) expect(reply.status, reply.text).toBe(503)
        else expectUnavailable(reply)
      } catch (error) {
        noteFailure(`${label}: ${seen}: ${String(error).split("\n")[0]}`)
      }
    }

    await proxy.setMode(fault)
    const faultAt = performance.now()

    // Concurrent rounds through the first ~4.5 s of the outage, at least two (the key cache lapses after
    // 1 s, pools degrade).
    for (let round = 0; !hung && (round < 2 || performance.now() - faultAt < 4_500); round++) {
      const roundStart = performance.now()
      await Promise.all([
        ...needsDatabase().map(([label, send]) => expectFastUnavailable(`round ${round} ${label}`, send)),
        ...cached().map(async ([label, send]) => {
          const outcome = await send().catch((error) => error as Error)
          if (outcome instanceof Error) return void noteFailure(`round ${round} ${label}: ${outcome.message.split("\n")[0]}`)
          observedCached.push(`+${Math.round(roundStart - faultAt)} ms ${label}: ${outcome.status}`)
          slowestMs = Math.max(slowestMs, outcome.elapsedMs)
          if (outcome.elapsedMs >= budgetMs) failures.push(`round ${round} ${label}: answered after ${Math.round(outcome.elapsedMs)} ms`)
          if (outcome.status !== 200) {
            try {
              expectUnavailable(outcome)
            } catch (error) {
              failures.push(`round ${round} ${label}: ${outcome.status} ${outcome.body?.code} after ${Math.round(outcome.elapsedMs)} ms: ${String(error).split("\n")[0]}`)
            }
          }
        }),
        (async () => {
          const health = await call(baseUrl, "GET", "/healthz", { timeoutMs: budgetMs })
          if (!(health.kind === "answer" && health.answer.status === 200)) failures.push(`round ${round} /healthz: ${describeOutcome(health)}`)
        })()
      ])
      // One request at a time as well, each on its own.
      for (const [label, send] of needsDatabase()) if (!hung) await expectFastUnavailable(`round ${round} (alone) ${label}`, send)
      await sleep(Math.max(0, 1_000 - (performance.now() - roundStart)))
    }
    console.log(`outage (${fault}): slowest answer during the outage ${Math.round(slowestMs)} ms; cached reads: ${observedCached.join("; ")}`)
    // Soft, so the recovery below is still checked (and reported) when the outage answers were wrong.
    expect.soft(failures, `during the ${fault} outage`).toEqual([])
    expect(child.exited, `the process exited during the outage\n${child.output}`).toBeUndefined()
    expect((await answer(baseUrl, "GET", "/healthz", { timeoutMs: budgetMs })).status).toBe(200)

    // The database comes back: ready and writing again within 5 s, by itself.
    await proxy.setMode("forward")
    const healedAt = performance.now()
    await pollUntil("/readyz 200 after the database came back", 5_000, async () => {
      const ready = await call(baseUrl, "GET", "/readyz", { timeoutMs: 2_000 })
      return ready.kind === "answer" && ready.answer.status === 200 ? true : undefined
    }, 100)
    const readyAfter = performance.now() - healedAt
    await pollUntil("a receipt write after the database came back", Math.max(0, 5_000 - readyAfter), async () => {
      const created = await call(baseUrl, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody(`outage-${fault}-after`, subject), timeoutMs: 2_000 })
      return created.kind === "answer" && created.answer.status === 201 ? true : undefined
    }, 100)
    console.log(`outage (${fault}): ready ${Math.round(readyAfter)} ms and writing ${Math.round(performance.now() - healedAt)} ms after the database came back`)
    const put = await answer(baseUrl, "PUT", `/api/v1/determinations/${subject}`, {
      bearer: childOperatorToken,
      body: determination(++revision)
    })
    expect(put.status, put.text).toBe(200)
    expect((await answer(baseUrl, "GET", `/api/v1/reliance-receipts/${warm.body.receipt_id}`, { bearer: key })).status).toBe(200)
    expect(child.exited).toBeUndefined()
  })
})
