import { Agent, request as httpRequest } from "node:http"
import { connect } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestServer, type TestServer } from "../support/server.js"

interface Exchange {
  readonly status: number
  readonly connection: string | undefined
  readonly reusedSocket: boolean
}

const exchange = (agent: Agent, url: string, method = "GET", body?: string, headers: Record<string, string> = {}) =>
  new Promise<Exchange>((resolve, reject) => {
    const req = httpRequest(url, { agent, method, headers }, (res) => {
      res.resume()
      res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, reusedSocket: req.reusedSocket }))
    })
    req.on("error", reject)
    req.end(body)
  })

/**
 * The front door closes a connection only when it answered before reading a body the client sent; every
 * other answer keeps the connection for the next request (a regression here costs a TCP handshake per
 * request, and through a cluster primary far more).
 */
describe("keep-alive", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server?.close())

  it("keeps the connection for requests without a body, answered or refused", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const first = await exchange(agent, `${server.baseUrl}/healthz`)
      const second = await exchange(agent, `${server.baseUrl}/api/v1/trust/DET-V1-KEEPALIVE-0001/human`)
      const third = await exchange(agent, `${server.baseUrl}/api/v1/trust/DET-V1-KEEPALIVE-0001/machine`)
      expect([first.status, second.status, third.status]).toEqual([200, 404, 401])
      expect([first, second, third].map((e) => e.connection)).toEqual(["keep-alive", "keep-alive", "keep-alive"])
      expect([second.reusedSocket, third.reusedSocket]).toEqual([true, true])
    } finally {
      agent.destroy()
    }
  })

  it("keeps the connection after refusing a request whose (small) body came with it", async () => {
    // The front door starts such a request once its body is parsed, so the body is read when the answer goes.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const refused = await exchange(agent, `${server.baseUrl}/api/v1/reliance-receipts`, "POST", "{}", { "content-type": "application/json" })
      const next = await exchange(agent, `${server.baseUrl}/healthz`)
      expect([refused.status, next.status]).toEqual([401, 200])
      expect([refused.connection, next.connection]).toEqual(["keep-alive", "keep-alive"])
      expect(next.reusedSocket).toBe(true)
    } finally {
      agent.destroy()
    }
  })

  it("closes the connection after refusing a request whose body it did not read", async () => {
    // 1,000 bytes announced, 1 sent: the 401 goes before the rest, so nobody would read it and the connection ends.
    const { port } = new URL(server.baseUrl)
    const answer = await new Promise<{ readonly head: string; readonly closedByServer: boolean }>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1", () => {
        socket.write(
          "POST /api/v1/reliance-receipts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
      })
      let received = ""
      socket.setEncoding("latin1")
      socket.on("data", (chunk: string) => {
        received += chunk
      })
      socket.on("error", reject)
      socket.on("end", () => resolve({ head: received.split("\r\n\r\n")[0] ?? "", closedByServer: true }))
      setTimeout(() => {
        socket.destroy()
        resolve({ head: received.split("\r\n\r\n")[0] ?? "", closedByServer: false })
      }, 5_000).unref()
    })
    expect(answer.head.split("\r\n")[0]).toBe("HTTP/1.1 401 Unauthorized")
    expect(answer.head.toLowerCase()).toContain("\r\nconnection: close")
    expect(answer.closedByServer).toBe(true)
  })
})
