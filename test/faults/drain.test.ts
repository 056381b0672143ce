import { afterAll, describe, expect, it } from "vitest"
import { expectProblem } from "../support/http.js"
import { Deployment, type DeploymentKind } from "../support/childServer.js"
import { databaseKinds, determination, postgresAvailable, provisionKey, putDetermination, receiptBody } from "./service.js"
import { answer, call, describeOutcome, type Outcome, RawConnection } from "./wire.js"

/**
 * docs/API.md §13, "Stop": SIGTERM or SIGINT → /readyz 503 at once, no new connections, requests in
 * flight finish (grace PV_SHUTDOWN_GRACE_MS), pending writes (grouped receipt inserts, …) are flushed,
 * pools closed, exit code 0. Cluster workers do the same.
 */

const graceMs = 6_000
/** Exit is due within the grace; this much more covers process teardown on a loaded machine. */
const exitMarginMs = 2_000

interface Variant {
  readonly name: string
  readonly kind: DeploymentKind
  readonly env: Record<string, string>
}

const variants: Array<Variant> = [
  ...databaseKinds.map((kind) => ({ name: kind, kind, env: {} })),
  ...(postgresAvailable ? [{ name: "postgres, PV_WORKERS=2", kind: "postgres" as const, env: { PV_WORKERS: "2" } }] : [])
]

/** A receipt answer (201 new / 200 replay) as the server acknowledged it. */
type Acknowledged = Map<string, any>

const record = (acknowledged: Acknowledged, outcome: Outcome) => {
  if (outcome.kind === "answer" && (outcome.answer.status === 201 || outcome.answer.status === 200)) {
    acknowledged.set(outcome.answer.body.receipt_id, outcome.answer.body)
  }
}

describe.each(variants)("SIGTERM drain ($name)", ({ kind, env }) => {
  let deployment: Deployment | undefined
  const connections: Array<RawConnection> = []
  afterAll(async () => {
    for (const connection of connections) connection.destroy()
    await deployment?.dispose()
  })

  it("readyz 503 at once, in-flight requests finish, idle keep-alives and new connections are refused, exit 0, acknowledged writes kept", async () => {
    deployment = await Deployment.create(kind, { env: { PV_SHUTDOWN_GRACE_MS: String(graceMs), ...env } })
    const { child, baseUrl } = await deployment.start()
    const port = Number(new URL(baseUrl).port)
    const key = await provisionKey(baseUrl)
    const subject = "DET-V1-DRAIN-0001"
    expect((await putDetermination(baseUrl, subject, determination(0))).status).toBe(201)

    const acknowledged: Acknowledged = new Map()
    for (let i = 0; i < 3; i++) {
      const created = await call(baseUrl, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody(`drain-warm-${i}`, subject) })
      expect(created.kind === "answer" && created.answer.status, describeOutcome(created)).toBe(201)
      record(acknowledged, created)
    }

    // Keep-alive connections opened (and used once) before the signal, then left idle. With workers,
    // several, so that every worker very likely holds some.
    const open = async () => {
      const connection = await RawConnection.open(port)
      connections.push(connection)
      connection.writeRequest("GET", "/healthz")
      const first = await connection.response(5_000)
      expect(first.kind === "answer" && first.answer.status, describeOutcome(first)).toBe(200)
      return connection
    }
    const readinessConnections = await Promise.all([open(), open(), open()])
    const idleConnections = await Promise.all([open(), open(), open()])

    // (b) A request in flight when SIGTERM arrives: headers accepted (100 Continue proves the server
    // is inside this request), half the body sent; the rest follows only after the drain has begun.
    const slow = await RawConnection.open(port)
    connections.push(slow)
    const slowPayload = JSON.stringify(receiptBody("drain-slow", subject))
    slow.writeHead("POST", "/api/v1/reliance-receipts", {
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(slowPayload)),
      expect: "100-continue"
    })
    expect(await slow.interim(5_000), "100 Continue for the slow request").toBe(100)
    const half = Math.floor(slowPayload.length / 2)
    slow.write(slowPayload.slice(0, half))

    // Several receipt creates in flight as well: the signal goes out once the first is answered.
    const burst = Array.from({ length: 20 }, (_, i) =>
      call(baseUrl, "POST", "/api/v1/reliance-receipts", { bearer: key, body: receiptBody(`drain-burst-${i}`, subject), timeoutMs: graceMs + exitMarginMs }))
    await Promise.race(burst)

    const signalledAt = performance.now()
    child.signal("SIGTERM")
    const sinceSignal = () => Math.round(performance.now() - signalledAt)

    // (a) /readyz turns 503 at once on an already open keep-alive connection, or the connection is
    // closed by the server; never a hang. (200 is fine only until the process has seen the signal.)
    const readiness: Array<string> = []
    for (const connection of readinessConnections) {
      for (;;) {
        if (connection.closed !== undefined) {
          readiness.push(`closed (${connection.closed}) by +${sinceSignal()} ms`)
          break
        }
        connection.writeRequest("GET", "/readyz")
        const outcome = await connection.response(2_000)
        expect(outcome.kind, `readyz on a keep-alive connection after SIGTERM: ${describeOutcome(outcome)}`).not.toBe("timeout")
        if (outcome.kind === "closed") {
          readiness.push(`closed by +${sinceSignal()} ms`)
          break
        }
        if (outcome.kind === "answer" && outcome.answer.status === 503) {
          readiness.push(`503 at +${sinceSignal()} ms`)
          break
        }
        expect(outcome.kind === "answer" && outcome.answer.status, describeOutcome(outcome)).toBe(200)
        expect(sinceSignal(), "/readyz still 200 on a keep-alive connection 1 s after SIGTERM").toBeLessThan(1_000)
      }
    }

    // (c) A NEW request on an idle keep-alive connection opened before the signal: 503 problem+json with
    // Connection: close, or the server closes the connection; never a hang.
    const idle: Array<string> = []
    for (const connection of idleConnections) {
      if (connection.closed !== undefined) {
        idle.push(`closed (${connection.closed})`)
        continue
      }
      const since = performance.now()
      connection.writeRequest("GET", `/api/v1/reliance-receipts/${[...acknowledged.keys()][0]}`, { bearer: key })
      const outcome = await connection.response(3_000, since)
      expect(outcome.kind, `a request on an idle keep-alive connection after SIGTERM: ${describeOutcome(outcome)}`).not.toBe("timeout")
      if (outcome.kind === "answer") {
        expectProblem(outcome.answer, 503, "unavailable")
        expect(outcome.answer.headers.get("connection"), "Connection: close on the 503 of a draining server").toMatch(/close/i)
        expect(await connection.waitClosed(2_000), "the server closes the connection after its 503").toBe(true)
      }
      idle.push(describeOutcome(outcome))
    }

    // (d) No new connections: connects are refused (one accepted in the first instants must be answered).
    const fresh: Array<string> = []
    for (;;) {
      const outcome = await call(baseUrl, "GET", "/readyz", { timeoutMs: 2_000 })
      fresh.push(`+${sinceSignal()} ms ${outcome.kind === "answer" ? outcome.answer.status : outcome.kind}`)
      expect(outcome.kind, `a new connection after SIGTERM: ${describeOutcome(outcome)}`).not.toBe("timeout")
      if (outcome.kind === "refused") break
      if (outcome.kind === "answer") expect(outcome.answer.status, describeOutcome(outcome)).toBe(503)
      expect(sinceSignal(), `new connections still accepted 1 s after SIGTERM: ${fresh.join(", ")}`).toBeLessThan(1_000)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    console.log(`drain (${kind}${env.PV_WORKERS ? `, ${env.PV_WORKERS} workers` : ""}): readyz ${readiness.join("; ")} | idle keep-alive: ${idle.join("; ")} | new connections: ${fresh.join(", ")}`)

    // (b) The in-flight request completes normally once its body arrives.
    expect(child.exited, `the process exited with a request in flight\n${child.output}`).toBeUndefined()
    const restSentAt = performance.now()
    slow.write(slowPayload.slice(half))
    const slowOutcome = await slow.response(5_000, restSentAt)
    expect(slowOutcome.kind === "answer" && slowOutcome.answer.status, `the in-flight request: ${describeOutcome(slowOutcome)}`).toBe(201)
    record(acknowledged, slowOutcome)

    // Burst: each either acknowledged, or refused cleanly; none hangs.
    for (const outcome of await Promise.all(burst)) {
      expect(outcome.kind, `a burst create: ${describeOutcome(outcome)}`).not.toBe("timeout")
      if (outcome.kind === "answer" && outcome.answer.status >= 300) expectProblem(outcome.answer, 503, "unavailable")
      record(acknowledged, outcome)
    }

    // (e) Exit code 0 within the grace.
    const exit = await child.waitForExit(graceMs + exitMarginMs + 5_000).catch((error) => error as Error)
    expect(exit instanceof Error ? exit.message : undefined, "the process did not exit").toBeUndefined()
    const exited = exit as Exclude<typeof exit, Error>
    expect({ code: exited.code, signal: exited.signal }, child.output).toEqual({ code: 0, signal: null })
    expect(exited.at - signalledAt, "exit after SIGTERM within PV_SHUTDOWN_GRACE_MS (+ margin)").toBeLessThan(graceMs + exitMarginMs)

    // (f) Everything acknowledged is there after a restart, unchanged.
    const restarted = await deployment.start({ PV_WORKERS: "1" })
    for (const [receiptId, body] of acknowledged) {
      const read = await answer(restarted.baseUrl, "GET", `/api/v1/reliance-receipts/${receiptId}`, { bearer: key })
      expect(read.status, `acknowledged receipt ${receiptId} after restart: ${read.text}`).toBe(200)
      expect(read.body.receipt_digest).toBe(body.receipt_digest)
      expect(read.body.snapshot_payload).toEqual(body.snapshot_payload)
    }
    console.log(`drain (${kind}): ${acknowledged.size} acknowledged receipts all present after restart`)
    restarted.child.signal("SIGTERM")
    await restarted.child.waitForExit(graceMs + exitMarginMs).catch(() => undefined)
  })
})
