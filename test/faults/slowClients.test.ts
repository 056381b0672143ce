import { connect, type Socket } from "node:net"
import { afterAll, describe, expect, it } from "vitest"
import { Deployment } from "../support/childServer.js"
import { databaseKinds, determination, provisionKey, putDetermination } from "./service.js"

/**
 * docs/API.md §13, "Slow clients": header and request time-outs, a header size bound and a connection cap
 * keep one client from starving the others. Here: 300 idle sockets and 100 that dribble their headers
 * against the compiled server (`npm start`'s heap limit), while another client's requests are timed. A
 * wall-clock bound belongs here, where fault files run one at a time, not beside the parallel HTTP suites.
 * test/http/slowClients.http.test.ts keeps the time-outs, the connection cap and the early 401.
 */

const idleSockets = 300
const dribblingSockets = 100
/** Each of the other client's answers, measured from its first byte to its last. */
const budgetMs = 1_000

const open = (port: number): { socket: Socket; connected: Promise<void>; isClosed: () => boolean } => {
  const socket = connect({ host: "127.0.0.1", port })
  let closed = false
  socket.on("error", () => undefined)
  socket.once("close", () => (closed = true))
  const connected = new Promise<void>((resolve, reject) => {
    socket.once("connect", () => resolve())
    socket.once("error", reject)
  })
  return { socket, connected, isClosed: () => closed }
}

/** Time one fetch; a request that never answers fails after 5 s instead of hanging the suite. */
const timed = async (url: string, init: RequestInit = {}) => {
  const started = performance.now()
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(5_000) })
  await response.arrayBuffer()
  return { status: response.status, ms: performance.now() - started }
}

describe.each(databaseKinds)("idle and dribbling sockets do not starve other clients (%s)", (kind) => {
  let deployment: Deployment | undefined
  afterAll(async () => {
    await deployment?.dispose()
  })

  it(`answers /healthz and /machine within ${budgetMs} ms each while ${idleSockets} sockets idle and ${dribblingSockets} dribble headers`, async () => {
    deployment = await Deployment.create(kind)
    const { baseUrl } = await deployment.start()
    const port = Number(new URL(baseUrl).port)
    const publicId = "DET-V1-SLOW-0001"
    const put = await putDetermination(baseUrl, publicId, determination(1))
    expect(put.status, put.text).toBe(201)
    const key = await provisionKey(baseUrl, ["trust:read"])

    const idle = Array.from({ length: idleSockets }, () => open(port))
    const dribbling = Array.from({ length: dribblingSockets }, () => open(port))
    const all = [...idle, ...dribbling]
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.all(all.map((c) => c.connected))
      for (const c of dribbling) c.socket.write("GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Slow: ")
      timer = setInterval(() => {
        for (const c of dribbling) if (!c.isClosed()) c.socket.write("a")
      }, 200)

      const healthz: Array<number> = []
      const machine: Array<number> = []
      for (let i = 0; i < 20; i++) {
        const h = await timed(`${baseUrl}/healthz`)
        expect(h.status).toBe(200)
        healthz.push(h.ms)
        const m = await timed(`${baseUrl}/api/v1/trust/${publicId}/machine`, { headers: { authorization: `Bearer ${key}` } })
        expect(m.status).toBe(200)
        machine.push(m.ms)
      }
      expect(Math.max(...healthz), `healthz times ${healthz.map(Math.round).join(",")}`).toBeLessThan(budgetMs)
      expect(Math.max(...machine), `machine times ${machine.map(Math.round).join(",")}`).toBeLessThan(budgetMs)
      // The load was really there while we measured: most of the slow sockets were still open.
      expect(all.filter((c) => !c.isClosed()).length).toBeGreaterThan(350)
    } finally {
      if (timer !== undefined) clearInterval(timer)
      for (const c of all) c.socket.destroy()
    }
  })
})
