import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createServer as createTlsServer } from "node:tls"
import { afterEach, describe, expect, it } from "vitest"
import { generateSecret, webhookHeaders } from "../../src/webhooks/Signature.js"
import { sendWebhook } from "../../src/webhooks/Send.js"
import { verifyWebhook } from "../../src/client/webhook.js"

/** A real receiver on loopback that counts what reached it. */
interface Receiver {
  readonly url: string
  readonly port: number
  readonly requests: Array<{ readonly headers: IncomingMessage["headers"]; readonly body: string }>
  connections: number
  /** Sockets that have closed, from the receiver's side. */
  closed: number
  /** Bytes that arrived on any connection. */
  bytes: number
}

const opened: Array<Server | TcpServer> = []
afterEach(async () => {
  for (const server of opened.splice(0)) {
    if ("closeAllConnections" in server) server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
})

const listen = async (server: Server | TcpServer, host: string): Promise<number> => {
  opened.push(server)
  await new Promise<void>((resolve) => server.listen(0, host, resolve))
  return (server.address() as AddressInfo).port
}

const receiver = async (
  handle: (req: IncomingMessage, res: ServerResponse, receiver: Receiver) => void,
  host = "127.0.0.1"
): Promise<Receiver> => {
  const state = { url: "", port: 0, requests: [], connections: 0, closed: 0, bytes: 0 } as { -readonly [K in keyof Receiver]: Receiver[K] }
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      state.requests.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") })
      handle(req, res, state)
    })
  })
  server.on("connection", (socket: Socket) => {
    state.connections++
    socket.on("close", () => state.closed++)
    socket.on("data", (chunk: Buffer) => (state.bytes += chunk.length))
  })
  state.port = await listen(server, host)
  state.url = `http://127.0.0.1:${state.port}/hooks/pv`
  return state
}

const secret = generateSecret()
const body = JSON.stringify({ type: "trust.changed", data: { public_id: "DET-V1-SEND-0001" } })
const attempt = (url: string, overrides: Partial<Parameters<typeof sendWebhook>[0]> = {}) =>
  sendWebhook({
    url,
    headers: webhookHeaders([secret], "msg_send_1", Math.floor(Date.now() / 1000), body),
    body,
    timeoutMs: 5_000,
    maxResponseBytes: 64 * 1024,
    allowPrivate: true,
    ...overrides
  })

const until = async (condition: () => boolean, ms = 2_000): Promise<void> => {
  const end = Date.now() + ms
  while (!condition() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 10))
}

describe("sendWebhook", () => {
  it("a 2xx is delivered, and the receiver gets a POST whose signature verifies", async () => {
    const target = await receiver((_req, res) => res.writeHead(204).end())
    expect(await attempt(target.url)).toEqual({ kind: "delivered", status: 204 })
    expect(target.requests).toHaveLength(1)
    const [{ headers, body: received }] = target.requests as [Receiver["requests"][number]]
    expect(received).toBe(body)
    expect(headers["content-type"]).toBe("application/json")
    expect(headers["content-length"]).toBe(String(Buffer.byteLength(body)))
    expect(verifyWebhook(secret, headers, received)).toMatchObject({ ok: true, id: "msg_send_1", payload: JSON.parse(body) })
  })

  it("a 500 fails with its status", async () => {
    const target = await receiver((_req, res) => res.writeHead(500, { "content-type": "text/plain" }).end("broken"))
    expect(await attempt(target.url)).toEqual({ kind: "failed", status: 500, error: "HTTP 500", scope: "origin" })
    const gone = await receiver((_req, res) => res.writeHead(410).end())
    expect(await attempt(gone.url)).toEqual({ kind: "failed", status: 410, error: "HTTP 410", scope: "url" })
    // 429 names the receiver's own rate: the origin's, like a 5xx; any other 4xx is the URL's.
    const busy = await receiver((_req, res) => res.writeHead(429).end())
    expect(await attempt(busy.url)).toEqual({ kind: "failed", status: 429, error: "HTTP 429", scope: "origin" })
    const missing = await receiver((_req, res) => res.writeHead(404).end())
    expect(await attempt(missing.url)).toEqual({ kind: "failed", status: 404, error: "HTTP 404", scope: "url" })
  })

  it("a 302 is not followed and fails", async () => {
    const elsewhere = await receiver((_req, res) => res.writeHead(200).end())
    const target = await receiver((_req, res) => res.writeHead(302, { location: elsewhere.url }).end())
    expect(await attempt(target.url)).toEqual({ kind: "failed", status: 302, error: "redirect 302 not followed", scope: "url" })
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(elsewhere.requests).toHaveLength(0)
    expect(elsewhere.connections).toBe(0)
  })

  it("a receiver that never answers times out, and the connection is closed", async () => {
    const target = await receiver(() => {})
    const started = Date.now()
    expect(await attempt(target.url, { timeoutMs: 300 })).toEqual({ kind: "failed", error: "timed out after 0.3 s", scope: "origin", timedOut: true })
    const elapsed = Date.now() - started
    expect(elapsed).toBeGreaterThanOrEqual(290)
    expect(elapsed).toBeLessThan(2_000)
    await until(() => target.closed === 1)
    expect(target.closed).toBe(1)
  })

  it("a receiver that never completes its status line times out too", async () => {
    const tcp = createTcpServer((socket) => { socket.on("data", () => socket.write("HTTP/1.1 20")) })
    const port = await listen(tcp, "127.0.0.1")
    expect(await attempt(`http://127.0.0.1:${port}/`, { timeoutMs: 300 })).toEqual({ kind: "failed", error: "timed out after 0.3 s", scope: "origin", timedOut: true })
  })

  it("reads at most maxResponseBytes of an endless answer, then drops the connection; a 2xx is still delivered", async () => {
    let written = 0
    const endless = (status: number) => (_req: IncomingMessage, res: ServerResponse) => {
      res.writeHead(status, { "content-type": "application/octet-stream" })
      const chunk = Buffer.alloc(16 * 1024, 0x61)
      const pump = () => {
        while (!res.destroyed && res.write(chunk)) written += chunk.length
        if (!res.destroyed) res.once("drain", pump)
      }
      pump()
    }
    const target = await receiver(endless(200))
    const started = Date.now()
    expect(await attempt(target.url, { maxResponseBytes: 100 * 1024, timeoutMs: 10_000 })).toEqual({ kind: "delivered", status: 200 })
    expect(Date.now() - started).toBeLessThan(5_000)
    await until(() => target.closed === 1)
    expect(target.closed).toBe(1)
    // The receiver could only write what the socket buffers took before it was closed, far below the timeout's worth.
    expect(written).toBeLessThan(64 * 1024 * 1024)

    const failing = await receiver(endless(503))
    expect(await attempt(failing.url, { maxResponseBytes: 1, timeoutMs: 10_000 })).toEqual({ kind: "failed", status: 503, error: "HTTP 503", scope: "origin" })
    await until(() => failing.closed === 1)
    expect(failing.closed).toBe(1)
  })

  it("a connection closed in the middle of the answer fails", async () => {
    const tcp = createTcpServer((socket) => {
      socket.once("data", () => { socket.write("HTTP/1.1 200 OK\r\nContent-Le"); setTimeout(() => socket.destroy(), 20) })
    })
    const port = await listen(tcp, "127.0.0.1")
    const outcome = await attempt(`http://127.0.0.1:${port}/`)
    expect(outcome.kind).toBe("failed")
    expect(outcome).not.toHaveProperty("status")
    if (outcome.kind === "failed") expect(outcome.error).toMatch(/socket hang up|ECONNRESET|HPE_/)

    const closing = createTcpServer((socket) => socket.once("data", () => socket.destroy()))
    const closingPort = await listen(closing, "127.0.0.1")
    expect(await attempt(`http://127.0.0.1:${closingPort}/`)).toMatchObject({ kind: "failed", error: expect.stringMatching(/socket hang up|ECONNRESET/), scope: "origin" })

    // After a non-2xx status, a cut body still fails, with the status.
    const cut = createTcpServer((socket) => {
      socket.once("data", () => { socket.write("HTTP/1.1 500 Oops\r\nContent-Length: 1000\r\n\r\npartial"); setTimeout(() => socket.destroy(), 20) })
    })
    const cutPort = await listen(cut, "127.0.0.1")
    expect(await attempt(`http://127.0.0.1:${cutPort}/`)).toEqual({ kind: "failed", status: 500, error: "HTTP 500", scope: "origin" })
  })

  it("a connection refused fails with its code", async () => {
    const tcp = createTcpServer()
    const port = await listen(tcp, "127.0.0.1")
    await new Promise<void>((resolve) => tcp.close(() => resolve()))
    opened.pop()
    const outcome = await attempt(`http://127.0.0.1:${port}/`)
    expect(outcome).toMatchObject({ kind: "failed", error: expect.stringMatching(/^connect ECONNREFUSED 127\.0\.0\.1:/), scope: "origin" })
  })

  it("refuses loopback by name and by every literal spelling when private addresses are not allowed; the receiver sees no request", async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end(), "::")
    const urls = {
      "127.0.0.1": `http://127.0.0.1:${target.port}/`,
      localhost: `http://localhost:${target.port}/`,
      "::1": `http://[::1]:${target.port}/`,
      "::ffff:127.0.0.1": `http://[::ffff:127.0.0.1]:${target.port}/`
    }
    for (const [address, url] of Object.entries(urls)) {
      const outcome = await attempt(url, { allowPrivate: false })
      expect(outcome.kind, url).toBe("failed")
      if (outcome.kind === "failed") expect(outcome.error, url).toMatch(/^refused address /)
      // The SSRF rules refuse this URL's address: a failure of the URL, not of a receiver (nothing else is held back).
      if (outcome.kind === "failed") expect(outcome.scope, url).toBe("url")
      // The address connected to, then the host as the URL parser normalised it when that differs (::ffff:7f00:1).
      if (address !== "localhost" && outcome.kind === "failed") expect(outcome.error.startsWith(`refused address ${address}`), outcome.error).toBe(true)
    }
    // The name is refused at the lookup, before any connection; a literal at the connect, before a byte is sent.
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(target.requests).toHaveLength(0)
    expect(target.connections).toBe(3)
    expect(target.bytes).toBe(0)
    for (const url of Object.values(urls)) expect(await attempt(url, { allowPrivate: true }), url).toEqual({ kind: "delivered", status: 200 })
    expect(target.requests).toHaveLength(4)
  })

  it("over https a refused address is dropped at the TCP connect, before the TLS hello", async () => {
    let bytes = 0
    let connections = 0
    const tcp = createTcpServer((socket) => {
      connections++
      socket.on("data", (chunk) => (bytes += chunk.length))
    })
    const port = await listen(tcp, "::")
    for (const host of ["127.0.0.1", "[::1]", "[::ffff:127.0.0.1]"]) {
      expect(await attempt(`https://${host}:${port}/`, { allowPrivate: false }), host).toMatchObject({
        kind: "failed",
        error: expect.stringMatching(/^refused address /),
        scope: "url"
      })
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(connections).toBe(3)
    expect(bytes).toBe(0)
  })

  it("over https the receiver's certificate is verified (a self-signed one fails the attempt)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "pv-webhook-tls-"))
    try {
      execFileSync("openssl", [
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
        "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")
      ], { stdio: "ignore" })
      let requests = 0
      const tls = createTlsServer({ key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) }, (socket) => {
        socket.on("data", () => requests++)
      })
      tls.on("tlsClientError", () => {})
      const port = await listen(tls, "127.0.0.1")
      const outcome = await attempt(`https://127.0.0.1:${port}/`)
      expect(outcome.kind).toBe("failed")
      if (outcome.kind === "failed") expect(outcome.error).toMatch(/self[- ]signed certificate/)
      if (outcome.kind === "failed") expect(outcome.scope).toBe("origin")
      expect(requests).toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("the refused name never connects at all", async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end())
    expect(await attempt(`http://localhost:${target.port}/`, { allowPrivate: false })).toMatchObject({ kind: "failed" })
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(target.connections).toBe(0)
  })

  it("an abort signal ends the attempt as aborted, before or during it", async () => {
    const target = await receiver(() => {})
    const controller = new AbortController()
    const pending = attempt(target.url, { signal: controller.signal, timeoutMs: 10_000 })
    await until(() => target.requests.length === 1)
    controller.abort()
    expect(await pending).toEqual({ kind: "failed", error: "aborted", scope: "origin" })
    expect(await attempt(target.url, { signal: AbortSignal.abort() })).toEqual({ kind: "failed", error: "aborted", scope: "origin" })
    expect(target.requests).toHaveLength(1)
  })

  it("never throws: a malformed URL, an unsupported scheme or an invalid header value is a failed attempt", async () => {
    expect(await attempt("not a url")).toEqual({ kind: "failed", error: "invalid URL", scope: "url" })
    expect(await attempt("ftp://127.0.0.1/")).toEqual({ kind: "failed", error: "unsupported scheme ftp:", scope: "url" })
    const outcome = await attempt("http://127.0.0.1:9/", { headers: { "x-bad": "line\nbreak" } })
    expect(outcome.kind).toBe("failed")
    if (outcome.kind === "failed") expect(outcome.error).not.toContain("line\nbreak")
  })
})
