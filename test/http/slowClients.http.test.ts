import { connect, type Socket } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * docs/API.md §13, "Slow clients" (slow or idle clients cannot starve others): header and request time-outs, bounded
 * connection count. And docs/API.md §4.3, §5.2: a request is refused for its credentials without waiting for a body
 * that may never come. That a few hundred dribbling or idle sockets do not delay other clients' answers is timed in
 * the fault suite (test/faults/slowClients.test.ts), where nothing else runs beside it.
 */

const kind = testDatabaseKind()
const id = "DET-V1-SLOW-0001"
const machinePath = `/api/v1/trust/${id}/machine`

interface Client {
  readonly socket: Socket
  readonly connected: Promise<void>
  /** Resolves when the connection is closed (by either side), with everything received. */
  readonly closed: Promise<{ readonly at: number; readonly received: string }>
  isClosed: () => boolean
  received: () => string
}

const openClient = (server: TestServer): Client => {
  const socket = connect({ host: "127.0.0.1", port: Number(new URL(server.baseUrl).port) })
  let data = ""
  let closedFlag = false
  socket.on("data", (chunk: Buffer) => (data += chunk.toString("latin1")))
  socket.on("error", () => undefined)
  const connected = new Promise<void>((resolve, reject) => {
    socket.once("connect", () => resolve())
    socket.once("error", reject)
  })
  const closed = new Promise<{ at: number; received: string }>((resolve) => {
    socket.once("close", () => {
      closedFlag = true
      resolve({ at: Date.now(), received: data })
    })
  })
  return { socket, connected, closed, isClosed: () => closedFlag, received: () => data }
}

/** Resolves with `promise`'s value, or with `undefined` once `ms` have passed. */
const within = <A>(promise: Promise<A>, ms: number): Promise<A | undefined> =>
  new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms)
    void promise.then((value) => {
      clearTimeout(timer)
      resolve(value)
    })
  })

/** Poll `check` until it holds or `ms` pass. */
const eventually = async (check: () => boolean | Promise<boolean>, ms: number, stepMs = 50): Promise<boolean> => {
  const deadline = Date.now() + ms
  for (;;) {
    if (await check()) return true
    if (Date.now() >= deadline) return false
    await new Promise((r) => setTimeout(r, stepMs))
  }
}

const statusOf = (raw: string) => Number(/^HTTP\/1\.[01] (\d{3})/.exec(raw)?.[1] ?? "0")
const headerOf = (raw: string, name: string) =>
  new RegExp(`\\r\\n${name}:\\s*([^\\r\\n]*)`, "i").exec(raw.slice(0, Math.max(0, raw.indexOf("\r\n\r\n")) + 2))?.[1]
const bodyOf = (raw: string) => raw.slice(raw.indexOf("\r\n\r\n") + 4)

/** Whatever the server sent before closing a slow client must be a problem+json answer with `status`. */
const expectClosedOrProblem = (received: string, status: number) => {
  if (received.length === 0) return
  expect(statusOf(received), received).toBe(status)
  expect(headerOf(received, "content-type"), received).toMatch(/^application\/problem\+json\b/)
  const body = JSON.parse(bodyOf(received))
  expect(body.status).toBe(status)
  expect(body.code).toBeTypeOf("string")
}

/** Read one raw response from `client` (complete headers + Content-Length body), or undefined after `ms`. */
const rawResponse = (client: Client, ms: number) =>
  eventually(() => {
    const raw = client.received()
    const end = raw.indexOf("\r\n\r\n")
    if (end === -1) return client.isClosed()
    const length = Number(headerOf(raw, "content-length") ?? "0")
    return raw.length >= end + 4 + length || client.isClosed()
  }, ms, 5).then((done) => (done ? client.received() : undefined))

const setup = async (config: Parameters<typeof startTestServer>[0]) => {
  const server = await startTestServer(config)
  const put = await putDetermination(server, id, determinationBody(Date.now() - DAY_MS))
  expect(put.status, put.text).toBe(201)
  const key = (await createKey(server, ["trust:read", "receipt:write"])).api_key
  return { server, key }
}

describe(`credentials are checked before the body is waited for (${kind})`, () => {
  let server: TestServer
  beforeAll(async () => {
    ({ server } = await setup({}))
  })
  afterAll(() => server?.close())

  it("refuses an unauthenticated request with 401 at once, without waiting for a body that never completes", async () => {
    const cases: ReadonlyArray<readonly [string, string, string | undefined]> = [
      ["POST", "/api/v1/reliance-receipts", undefined],
      ["POST", "/api/v1/reliance-receipts", `pv_live_${"A".repeat(38)}`],
      ["POST", "/api/v1/actionability", undefined],
      ["POST", "/api/v1/mcp", undefined],
      ["PUT", `/api/v1/determinations/${id}`, undefined],
      ["POST", "/api/v1/api-keys", "wrong-operator-token-0123456789abcdef"]
    ]
    for (const [method, path, bearer] of cases) {
      const client = openClient(server)
      try {
        await client.connected
        const started = Date.now()
        client.socket.write(
          `${method} ${path} HTTP/1.1\r\nHost: slow\r\nContent-Type: application/json\r\nContent-Length: 100\r\n` +
            (bearer === undefined ? "" : `Authorization: Bearer ${bearer}\r\n`) + "\r\n{"
        )
        const raw = await rawResponse(client, 1_000)
        expect(raw, `${method} ${path}: no answer within 1 s`).toBeDefined()
        expect(Date.now() - started).toBeLessThan(1_000)
        expect(statusOf(raw!), raw).toBe(401)
        expect(headerOf(raw!, "content-type")).toMatch(/^application\/problem\+json\b/)
        expect(JSON.parse(bodyOf(raw!)).code).toBe("unauthorized")
      } finally {
        client.socket.destroy()
      }
    }
  })
})

describe(`client time-outs (${kind})`, () => {
  let server: TestServer
  let key: string
  beforeAll(async () => {
    ({ server, key } = await setup({ config: { headersTimeoutMs: 1_000, requestTimeoutMs: 2_000 } }))
  })
  afterAll(() => server?.close())

  it("closes sockets that dribble their headers once headersTimeoutMs has passed (408 problem+json or a close)", async () => {
    const dribbling = Array.from({ length: 10 }, () => openClient(server))
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.all(dribbling.map((c) => c.connected))
      const started = Date.now()
      for (const c of dribbling) c.socket.write("GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Slow: ")
      timer = setInterval(() => {
        for (const c of dribbling) if (!c.isClosed()) c.socket.write("a")
      }, 200)
      const allClosed = await eventually(() => dribbling.every((c) => c.isClosed()), 5_000)
      expect(allClosed, `${dribbling.filter((c) => !c.isClosed()).length} of 10 still open after 5 s`).toBe(true)
      const closings = await Promise.all(dribbling.map((c) => c.closed))
      for (const { at, received } of closings) {
        expect(at - started).toBeGreaterThanOrEqual(900)
        expectClosedOrProblem(received, 408)
      }
    } finally {
      if (timer !== undefined) clearInterval(timer)
      for (const c of dribbling) c.socket.destroy()
    }
  })

  it("closes a socket that never sends anything once the header time-out has passed", async () => {
    const client = openClient(server)
    try {
      await client.connected
      const closed = await within(client.closed, 5_000)
      expect(closed, "idle connection still open after 5 s").toBeDefined()
      expectClosedOrProblem(closed!.received, 408)
    } finally {
      client.socket.destroy()
    }
  })

  it("ends an authenticated request whose body never completes once requestTimeoutMs has passed", async () => {
    for (const [method, path, bearer] of [
      ["POST", "/api/v1/reliance-receipts", key],
      ["PUT", `/api/v1/determinations/${id}`, server.operatorToken]
    ] as const) {
      const client = openClient(server)
      try {
        await client.connected
        const started = Date.now()
        client.socket.write(
          `${method} ${path} HTTP/1.1\r\nHost: slow\r\nAuthorization: Bearer ${bearer}\r\nContent-Type: application/json\r\n` +
            "Content-Length: 100\r\n\r\n{"
        )
        const closed = await within(client.closed, 6_000)
        expect(closed, `${method} ${path}: connection still held after 6 s`).toBeDefined()
        expect(closed!.at - started).toBeGreaterThanOrEqual(1_500)
        // An answer, if any, is a 408 problem (the body never arrived, so nothing else is possible).
        expectClosedOrProblem(closed!.received, 408)
      } finally {
        client.socket.destroy()
      }
    }
    // Nothing was half-processed: the determination is as it was, and the server still serves.
    const reply = await request(server, "GET", machinePath, { bearer: key })
    expect(reply.status).toBe(200)
    expect(reply.body.determination.tier).toBe("T2")
  })
})

describe(`connection cap (${kind})`, () => {
  let server: TestServer
  beforeAll(async () => {
    // No set-up requests: a kept-alive fetch connection would count against the 50 below.
    server = await startTestServer({ config: { maxConnections: 50 } })
  })
  afterAll(() => server?.close())

  it("closes the 51st concurrent connection at once, and serves new connections once others close", async () => {
    const held = Array.from({ length: 50 }, () => openClient(server))
    let extra: Client | undefined
    try {
      await Promise.all(held.map((c) => c.connected))
      // Every one of the 50 is a served connection: none was dropped.
      expect(await eventually(() => held.some((c) => c.isClosed()), 200)).toBe(false)
      extra = openClient(server)
      await extra.connected.catch(() => undefined)
      const started = Date.now()
      const closed = await within(extra.closed, 1_000)
      expect(closed, "the 51st connection was left hanging").toBeDefined()
      expect(closed!.at - started).toBeLessThan(1_000)
      expectClosedOrProblem(closed!.received, 503)
      expect(held.filter((c) => c.isClosed())).toHaveLength(0)

      for (const c of held.slice(0, 10)) c.socket.destroy()
      const served = await eventually(async () => {
        const probe = openClient(server)
        try {
          await probe.connected
          probe.socket.write("GET /healthz HTTP/1.1\r\nHost: cap\r\nConnection: close\r\n\r\n")
          const raw = await rawResponse(probe, 1_000)
          return raw !== undefined && statusOf(raw) === 200
        } catch {
          return false
        } finally {
          probe.socket.destroy()
        }
      }, 3_000)
      expect(served, "no new connection served after 10 of the 50 closed").toBe(true)
    } finally {
      extra?.socket.destroy()
      for (const c of held) c.socket.destroy()
    }
  })
})
