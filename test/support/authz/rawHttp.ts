import { connect } from "node:net"
import type { Reply } from "../http.js"
import type { TestServer } from "../server.js"

/** What came back on a raw socket: a parsed answer, or the connection closing / staying silent without one. */
export interface RawReply {
  /** The first answer on the socket, when a complete status line and header block arrived. */
  readonly status: number | undefined
  readonly headers: Headers
  readonly text: string
  /** The server closed the connection (before or after answering). */
  readonly closed: boolean
  /** Nothing complete arrived within the time-out: the request hung. */
  readonly timedOut: boolean
  /** Raw bytes received, for failure messages. */
  readonly raw: string
  readonly elapsedMs: number
}

const CRLF2 = Buffer.from("\r\n\r\n")

/** The number of bytes a chunked body occupies once its last chunk arrived, or undefined while incomplete. */
const chunkedLength = (body: Buffer): { readonly consumed: number; readonly data: Buffer } | undefined => {
  let offset = 0
  const parts: Array<Buffer> = []
  for (;;) {
    const lineEnd = body.indexOf("\r\n", offset)
    if (lineEnd === -1) return undefined
    const size = parseInt(body.subarray(offset, lineEnd).toString("latin1").split(";")[0]!.trim(), 16)
    if (!Number.isFinite(size)) return { consumed: body.length, data: Buffer.concat(parts) }
    offset = lineEnd + 2
    if (size === 0) {
      // Trailer section ends with an empty line.
      const end = body.indexOf("\r\n", offset)
      if (end === -1) return undefined
      if (end === offset) return { consumed: end + 2, data: Buffer.concat(parts) }
      const trailersEnd = body.indexOf(CRLF2, offset)
      return trailersEnd === -1 ? undefined : { consumed: trailersEnd + 4, data: Buffer.concat(parts) }
    }
    if (body.length < offset + size + 2) return undefined
    parts.push(body.subarray(offset, offset + size))
    offset += size + 2
  }
}

interface Parsed {
  readonly status: number
  readonly headers: Headers
  readonly body: Buffer
}

/** One complete HTTP/1.1 response at the start of `data`, if there is one yet. */
const parseResponse = (data: Buffer, closed: boolean, noBody: boolean): Parsed | undefined => {
  // Interim answers (100 Continue) come first; the answer is the final one after them.
  while (/^HTTP\/1\.[01] 1\d\d/.test(data.subarray(0, 16).toString("latin1"))) {
    const end = data.indexOf(CRLF2)
    if (end === -1) return undefined
    data = data.subarray(end + 4)
  }
  const headEnd = data.indexOf(CRLF2)
  if (headEnd === -1) return undefined
  const lines = data.subarray(0, headEnd).toString("latin1").split("\r\n")
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")
  if (match === null) return undefined
  const status = Number(match[1])
  const headers = new Headers()
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":")
    if (colon <= 0) continue
    try {
      headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim())
    } catch {
      // an invalid header from the server would be a finding of its own; keep parsing
    }
  }
  const rest = data.subarray(headEnd + 4)
  if (noBody || status === 204 || status === 304) {
    return { status, headers, body: Buffer.alloc(0) }
  }
  const length = headers.get("content-length")
  if (length !== null) {
    const n = Number(length.split(",")[0])
    return rest.length >= n ? { status, headers, body: rest.subarray(0, n) } : undefined
  }
  if ((headers.get("transfer-encoding") ?? "").toLowerCase().includes("chunked")) {
    const chunked = chunkedLength(rest)
    return chunked === undefined ? (closed ? { status, headers, body: rest } : undefined) : { status, headers, body: chunked.data }
  }
  return closed ? { status, headers, body: rest } : undefined
}

export interface RawOptions {
  /** Give up (and report a hang) after this long without a complete answer or a close. */
  readonly timeoutMs?: number
  /** The request was HEAD: the answer has no body whatever its headers say. */
  readonly head?: boolean
  /** Send the bytes in several writes, a few milliseconds apart. */
  readonly split?: ReadonlyArray<number>
}

/**
 * Sends exactly `bytes` on a fresh TCP connection and reads the first answer. Resolves when a complete
 * response arrived, the server closed the connection, or the time-out passed (never rejects).
 */
export const rawRequest = (server: TestServer, bytes: Buffer | string, options: RawOptions = {}): Promise<RawReply> => {
  const { port, hostname } = new URL(server.baseUrl)
  const payload = typeof bytes === "string" ? Buffer.from(bytes, "latin1") : bytes
  const timeoutMs = options.timeoutMs ?? 5_000
  const started = Date.now()
  return new Promise<RawReply>((resolve) => {
    const chunks: Array<Buffer> = []
    let settled = false
    let closed = false
    const socket = connect({ host: hostname, port: Number(port) })
    const finish = (timedOut: boolean) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      const data = Buffer.concat(chunks)
      const parsed = parseResponse(data, true, options.head === true)
      socket.destroy()
      resolve({
        status: parsed?.status,
        headers: parsed?.headers ?? new Headers(),
        text: parsed?.body.toString("utf8") ?? "",
        closed,
        timedOut: timedOut && parsed === undefined,
        raw: data.toString("latin1").slice(0, 2_000),
        elapsedMs: Date.now() - started
      })
    }
    const timer = setTimeout(() => finish(true), timeoutMs)
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk)
      if (parseResponse(Buffer.concat(chunks), false, options.head === true) !== undefined) finish(false)
    })
    socket.on("error", () => {
      closed = true
      finish(false)
    })
    socket.on("close", () => {
      closed = true
      finish(false)
    })
    socket.on("connect", () => {
      const splits = options.split ?? []
      if (splits.length === 0) {
        socket.write(payload)
        return
      }
      let offset = 0
      const points = [...splits, payload.length]
      const writeNext = (i: number) => {
        if (settled || i >= points.length) return
        const end = Math.min(points[i]!, payload.length)
        if (end > offset) socket.write(payload.subarray(offset, end))
        offset = Math.max(offset, end)
        setTimeout(() => writeNext(i + 1), 5)
      }
      writeNext(0)
    })
  })
}

/** A raw reply as the shape `expectProblem` reads. */
export const asReply = (reply: RawReply): Reply => {
  let body: unknown = undefined
  if (reply.text.length > 0) {
    try {
      body = JSON.parse(reply.text)
    } catch {
      body = undefined
    }
  }
  return { status: reply.status ?? 0, headers: reply.headers, body, text: reply.text }
}

/** Builds a request head + body as bytes (latin1 for the head so any byte can be placed in it). */
export const buildRequest = (
  requestLine: string | Buffer,
  headers: ReadonlyArray<readonly [string, string] | string | Buffer>,
  body?: Buffer | string
): Buffer => {
  const parts: Array<Buffer> = [typeof requestLine === "string" ? Buffer.from(requestLine, "latin1") : requestLine, Buffer.from("\r\n")]
  for (const header of headers) {
    if (Array.isArray(header)) parts.push(Buffer.from(`${header[0]}: ${header[1]}`, "latin1"))
    else parts.push(typeof header === "string" ? Buffer.from(header, "latin1") : header as Buffer)
    parts.push(Buffer.from("\r\n"))
  }
  parts.push(Buffer.from("\r\n"))
  if (body !== undefined) parts.push(typeof body === "string" ? Buffer.from(body, "utf8") : body)
  return Buffer.concat(parts)
}
