import { Agent, request as httpRequest } from "node:http"
import { connect } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createKey, putDetermination } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { determinationBody, relianceRequest } from "../support/fixtures.js"

interface Exchange {
  readonly status: number
  readonly connection: string | undefined
  readonly reusedSocket: boolean
  readonly text: string
}

const exchange = (agent: Agent, url: string, method = "GET", body?: string, headers: Record<string, string> = {}) =>
  new Promise<Exchange>((resolve, reject) => {
    const req = httpRequest(url, { agent, method, headers }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => {
        text += chunk
      })
      res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, reusedSocket: req.reusedSocket, text }))
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

  it("answers requests with bodies one after another on one connection, each with the body it sent", async () => {
    // Small bodies are taken whole once parsed (http/RequestGuard.ts); each answer must be to its own body.
    const { api_key } = await createKey(server, ["receipt:write"])
    expect((await putDetermination(server, "DET-V1-KEEPALIVE-0002", determinationBody(Date.now() - 60_000))).status).toBe(201)
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const answers: Array<{ readonly exchange: Exchange; readonly principal: string }> = []
      for (const principal of ["keep-alive-a", "keep-alive-b", "keep-alive-c"]) {
        const body = JSON.stringify(relianceRequest("DET-V1-KEEPALIVE-0002", principal))
        const headers = { authorization: `Bearer ${api_key}`, "content-type": "application/json" }
        answers.push({ exchange: await exchange(agent, `${server.baseUrl}/api/v1/reliance-receipts`, "POST", body, headers), principal })
      }
      expect(answers.map((a) => a.exchange.status)).toEqual([201, 201, 201])
      expect(answers.map((a) => a.exchange.connection)).toEqual(["keep-alive", "keep-alive", "keep-alive"])
      expect(answers.map((a) => a.exchange.reusedSocket)).toEqual([false, true, true])
      expect(answers.map((a) => JSON.parse(a.exchange.text).principal)).toEqual(answers.map((a) => a.principal))
    } finally {
      agent.destroy()
    }
  })

  it("answers pipelined requests with bodies in order, each with the body it sent", async () => {
    const { api_key } = await createKey(server, ["receipt:write"])
    expect((await putDetermination(server, "DET-V1-KEEPALIVE-0003", determinationBody(Date.now() - 60_000))).status).toBe(201)
    const { port } = new URL(server.baseUrl)
    const principals = ["pipelined-a", "pipelined-b", "pipelined-c"]
    const wire = principals.map((principal) => {
      const body = JSON.stringify(relianceRequest("DET-V1-KEEPALIVE-0003", principal))
      return `POST /api/v1/reliance-receipts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${api_key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    }).join("")
    const received = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1", () => socket.write(wire))
      let text = ""
      socket.setEncoding("utf8")
      socket.on("data", (chunk: string) => {
        text += chunk
        if ((text.match(/HTTP\/1\.1 /g) ?? []).length === principals.length && text.trimEnd().endsWith("}")) {
          socket.destroy()
          resolve(text)
        }
      })
      socket.on("error", reject)
      setTimeout(() => reject(new Error(`pipelined answers incomplete: ${text.slice(0, 500)}`)), 10_000).unref()
    })
    const statuses = [...received.matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => Number(m[1]))
    // Each answer's own principal (a receipt names it more than once).
    const answered = received.split("HTTP/1.1 ").slice(1).map((answer) => /"principal":"([^"]+)"/.exec(answer)?.[1])
    expect(statuses).toEqual([201, 201, 201])
    expect(answered).toEqual(principals)
  })

  it("counts a request whose client reset the connection right after sending it as 499, and keeps serving", async () => {
    const count499 = async () => {
      const text = await fetch(`${server.baseUrl}/metrics`).then((r) => r.text())
      return [...text.matchAll(/^pv_http_requests_total\{[^}]*status="499"[^}]*\} (\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0)
    }
    const before = await count499()
    const { port } = new URL(server.baseUrl)
    const body = JSON.stringify(relianceRequest("DET-V1-KEEPALIVE-0004", "reset-right-after"))
    for (let i = 0; i < 5; i++) {
      await new Promise<void>((resolve) => {
        const socket = connect(Number(port), "127.0.0.1", () => {
          socket.write(
            `POST /api/v1/reliance-receipts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
              `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
          )
          socket.resetAndDestroy()
        })
        socket.on("close", () => resolve())
        socket.on("error", () => {})
      })
    }
    // Each is counted once, as 499 wherever the reset found it (before the app started, or while it worked).
    let after = await count499()
    for (let wait = 0; after - before < 5 && wait < 50; wait++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      after = await count499()
    }
    expect(after - before).toBe(5)
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200)
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
