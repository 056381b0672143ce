import { request as httpRequest } from "node:http"
import { connect, type Socket } from "node:net"
import type { Reply } from "../support/http.js"

/**
 * HTTP for the fault suite, with the connection under the test's control: every request either ends in
 * a complete answer, a refused connect, a reset/close, or a client time-out, and the test says which ones
 * are acceptable. Nothing here retries or pools connections behind the test's back.
 */

export interface Answer extends Reply {
  /** From the first byte written (or the connect attempt) to the complete answer. */
  readonly elapsedMs: number
}

export type Outcome =
  | { readonly kind: "answer"; readonly answer: Answer }
  | { readonly kind: "refused"; readonly elapsedMs: number }
  /** The connection was closed or reset by the server before a complete answer. */
  | { readonly kind: "closed"; readonly elapsedMs: number; readonly detail: string }
  | { readonly kind: "timeout"; readonly elapsedMs: number }

export const describeOutcome = (outcome: Outcome): string =>
  outcome.kind === "answer"
    ? `${outcome.answer.status} after ${Math.round(outcome.answer.elapsedMs)} ms: ${outcome.answer.text.slice(0, 300)}`
    : `${outcome.kind} after ${Math.round(outcome.elapsedMs)} ms${"detail" in outcome ? ` (${outcome.detail})` : ""}`

const parseBody = (text: string): unknown => {
  if (text.length === 0) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

export interface CallOptions {
  readonly bearer?: string
  readonly body?: unknown
  readonly headers?: Record<string, string>
  /** The client gives up after this long and reports a time-out (default 5000 ms). */
  readonly timeoutMs?: number
}

/** One request on a NEW connection (no agent, no keep-alive). */
export const call = (baseUrl: string, method: string, path: string, options: CallOptions = {}): Promise<Outcome> =>
  new Promise((resolve) => {
    const started = performance.now()
    const elapsed = () => performance.now() - started
    const headers: Record<string, string> = { ...options.headers }
    if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`
    let payload: string | undefined
    if (options.body !== undefined) {
      payload = JSON.stringify(options.body)
      headers["content-type"] ??= "application/json"
      headers["content-length"] = String(Buffer.byteLength(payload))
    }
    let settled = false
    const settle = (outcome: Outcome) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(outcome)
    }
    const req = httpRequest(baseUrl + path, { method, headers, agent: false })
    const timer = setTimeout(() => {
      settle({ kind: "timeout", elapsedMs: elapsed() })
      req.destroy()
    }, options.timeoutMs ?? 5_000)
    req.on("response", (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        const responseHeaders = new Headers()
        for (const [name, value] of Object.entries(res.headers)) {
          if (value !== undefined) responseHeaders.set(name, Array.isArray(value) ? value.join(", ") : value)
        }
        settle({
          kind: "answer",
          answer: { status: res.statusCode ?? 0, headers: responseHeaders, text, body: parseBody(text), elapsedMs: elapsed() }
        })
      })
      res.on("error", (error) => settle({ kind: "closed", elapsedMs: elapsed(), detail: String(error) }))
    })
    req.on("error", (error: NodeJS.ErrnoException) =>
      settle(
        error.code === "ECONNREFUSED"
          ? { kind: "refused", elapsedMs: elapsed() }
          : { kind: "closed", elapsedMs: elapsed(), detail: error.code ?? String(error) }
      ))
    req.end(payload)
  })

/** `call`, requiring a complete answer. */
export const answer = async (baseUrl: string, method: string, path: string, options: CallOptions = {}): Promise<Answer> => {
  const outcome = await call(baseUrl, method, path, options)
  if (outcome.kind !== "answer") throw new Error(`${method} ${path}: no answer: ${describeOutcome(outcome)}`)
  return outcome.answer
}

/** Polls `probe` until it returns a value (not undefined) or the deadline passes (then throws with the last note). */
export const pollUntil = async <A>(
  what: string,
  deadlineMs: number,
  probe: () => Promise<A | undefined>,
  intervalMs = 50
): Promise<A> => {
  const deadline = performance.now() + deadlineMs
  let last = ""
  for (;;) {
    try {
      const value = await probe()
      if (value !== undefined) return value
    } catch (error) {
      last = String(error)
    }
    if (performance.now() > deadline) throw new Error(`${what}: not reached within ${deadlineMs} ms ${last}`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}

const headerBlock = (method: string, path: string, port: number, headers: Record<string, string>) =>
  `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n` +
  Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("") + "\r\n"

interface Parsed {
  readonly status: number
  readonly headers: Headers
  readonly body: Buffer
  readonly consumed: number
}

/** One complete response at the start of `buffer`, or undefined when more bytes are needed. */
const parseResponse = (buffer: Buffer): Parsed | undefined => {
  const end = buffer.indexOf("\r\n\r\n")
  if (end < 0) return undefined
  const lines = buffer.subarray(0, end).toString("latin1").split("\r\n")
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1] ?? NaN)
  if (Number.isNaN(status)) throw new Error(`not an HTTP response: ${lines[0]}`)
  const headers = new Headers()
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":")
    if (colon > 0) headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim())
  }
  const start = end + 4
  if (status < 200 || status === 204 || status === 304) return { status, headers, body: Buffer.alloc(0), consumed: start }
  if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) {
    const chunks: Array<Buffer> = []
    let at = start
    for (;;) {
      const lineEnd = buffer.indexOf("\r\n", at)
      if (lineEnd < 0) return undefined
      const size = parseInt(buffer.subarray(at, lineEnd).toString("latin1"), 16)
      const dataStart = lineEnd + 2
      if (size === 0) {
        const trailerEnd = buffer.indexOf("\r\n", dataStart)
        if (trailerEnd < 0) return undefined
        return { status, headers, body: Buffer.concat(chunks), consumed: trailerEnd + 2 }
      }
      if (buffer.length < dataStart + size + 2) return undefined
      chunks.push(buffer.subarray(dataStart, dataStart + size))
      at = dataStart + size + 2
    }
  }
  const length = headers.get("content-length")
  if (length === null) return undefined // read to close: completed by the close handler
  const n = Number(length)
  if (buffer.length < start + n) return undefined
  return { status, headers, body: buffer.subarray(start, start + n), consumed: start + n }
}

/**
 * A raw keep-alive connection: the test decides what is written when (half a body, a second request on an
 * idle socket) and sees exactly what comes back, including interim 100 Continue and a server-side close.
 */
export class RawConnection {
  private buffer = Buffer.alloc(0)
  private ended: string | undefined
  private waiters: Array<() => void> = []

  private constructor(readonly socket: Socket, readonly port: number) {
    socket.on("data", (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk])
      this.wake()
    })
    socket.on("error", (error: NodeJS.ErrnoException) => {
      this.ended ??= error.code ?? String(error)
      this.wake()
    })
    socket.on("close", () => {
      this.ended ??= "closed by the server"
      this.wake()
    })
  }

  /** Connects; rejects with the error (e.g. ECONNREFUSED) when the connect fails. */
  static open(port: number, timeoutMs = 5_000): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: "127.0.0.1", port })
      socket.setNoDelay(true)
      const timer = setTimeout(() => (socket.destroy(), reject(new Error("connect timed out"))), timeoutMs)
      socket.once("connect", () => {
        clearTimeout(timer)
        socket.removeAllListeners("error")
        resolve(new RawConnection(socket, port))
      })
      socket.once("error", (error) => (clearTimeout(timer), reject(error)))
    })
  }

  /** Whether the server closed (or reset) this connection. */
  get closed(): string | undefined {
    return this.ended
  }

  private wake() {
    for (const waiter of this.waiters.splice(0)) waiter()
  }

  private async waitFor<A>(timeoutMs: number, attempt: () => A | undefined): Promise<A | "timeout"> {
    const deadline = performance.now() + timeoutMs
    for (;;) {
      const value = attempt()
      if (value !== undefined) return value
      const left = deadline - performance.now()
      if (left <= 0) return "timeout"
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiters.push(() => (clearTimeout(timer), resolve()))
      })
    }
  }

  write(data: string | Buffer): void {
    this.socket.write(data)
  }

  /** Request line and headers (a Host header is added); the body, if any, is written separately. */
  writeHead(method: string, path: string, headers: Record<string, string> = {}): void {
    this.write(headerBlock(method, path, this.port, headers))
  }

  /** A whole request: headers (with content-type/length for a body) and the body. */
  writeRequest(method: string, path: string, options: { readonly bearer?: string; readonly body?: unknown; readonly headers?: Record<string, string> } = {}): void {
    const headers: Record<string, string> = { ...options.headers }
    if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body)
    if (payload !== undefined) {
      headers["content-type"] ??= "application/json"
      headers["content-length"] = String(Buffer.byteLength(payload))
    }
    this.writeHead(method, path, headers)
    if (payload !== undefined) this.write(payload)
  }

  /** Waits for an interim (1xx) response, e.g. 100 Continue, and consumes it. */
  async interim(timeoutMs: number): Promise<number | "timeout" | "closed"> {
    const result = await this.waitFor(timeoutMs, () => {
      const parsed = parseResponse(this.buffer)
      if (parsed && parsed.status < 200) {
        this.buffer = this.buffer.subarray(parsed.consumed)
        return parsed.status
      }
      // A final answer instead of an interim one is left in the buffer for `response`.
      if (parsed) return parsed.status
      if (this.ended !== undefined) return "closed" as const
      return undefined
    })
    return result
  }

  /** The next final response (1xx skipped), or how the connection ended, measured from `since`. */
  async response(timeoutMs: number, since = performance.now()): Promise<Outcome> {
    const result = await this.waitFor(timeoutMs, (): Outcome | undefined => {
      for (;;) {
        let parsed = parseResponse(this.buffer)
        if (!parsed && this.ended !== undefined && this.buffer.length > 0) {
          // A body delimited by the close of the connection.
          const end = this.buffer.indexOf("\r\n\r\n")
          if (end >= 0) {
            const head = parseResponse(Buffer.concat([this.buffer.subarray(0, end + 4)]))
            if (head && head.headers.get("content-length") === null && !/chunked/i.test(head.headers.get("transfer-encoding") ?? "")) {
              parsed = { ...head, body: this.buffer.subarray(end + 4), consumed: this.buffer.length }
            }
          }
        }
        if (!parsed) {
          if (this.ended !== undefined) return { kind: "closed", elapsedMs: performance.now() - since, detail: this.ended }
          return undefined
        }
        this.buffer = this.buffer.subarray(parsed.consumed)
        if (parsed.status < 200) continue
        const text = parsed.body.toString("utf8")
        return {
          kind: "answer",
          answer: { status: parsed.status, headers: parsed.headers, text, body: parseBody(text), elapsedMs: performance.now() - since }
        }
      }
    })
    return result === "timeout" ? { kind: "timeout", elapsedMs: performance.now() - since } : result
  }

  /** Waits until the server closes the connection (true) or the time passes (false). */
  async waitClosed(timeoutMs: number): Promise<boolean> {
    return (await this.waitFor(timeoutMs, () => (this.ended !== undefined ? true : undefined))) === true
  }

  destroy(): void {
    this.socket.destroy()
  }
}

/** Whether a new TCP connection to the port is refused right now ("refused"), or accepted ("accepted"). */
export const tryConnect = (port: number, timeoutMs = 1_000): Promise<"refused" | "accepted" | "timeout" | string> =>
  new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port })
    const timer = setTimeout(() => (socket.destroy(), resolve("timeout")), timeoutMs)
    socket.once("connect", () => (clearTimeout(timer), socket.destroy(), resolve("accepted")))
    socket.once("error", (error: NodeJS.ErrnoException) => (clearTimeout(timer), resolve(error.code === "ECONNREFUSED" ? "refused" : error.code ?? String(error))))
  })
