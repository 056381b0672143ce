import { Agent, request as httpRequest } from "node:http"
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

  it("closes the connection after refusing a request whose body it did not read", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const refused = await exchange(agent, `${server.baseUrl}/api/v1/reliance-receipts`, "POST", "{}", { "content-type": "application/json" })
      expect(refused.status).toBe(401)
      expect(refused.connection).toBe("close")
    } finally {
      agent.destroy()
    }
  })
})
