import { expect } from "vitest"
import type { TestServer } from "./server.js"

export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly body: any
  readonly text: string
}

export interface RequestOptions {
  readonly bearer?: string
  readonly body?: unknown
  /** Sent as-is, for malformed bodies. */
  readonly rawBody?: string
  readonly headers?: Record<string, string>
}

/**
 * The body as text; of a live event stream (which never ends) only its first message, then the request is
 * aborted, so a table of endpoints can treat the stream like any other answer.
 */
const textOf = async (response: Response, abort: AbortController): Promise<string> => {
  if (!(response.headers.get("content-type") ?? "").startsWith("text/event-stream") || response.body === null) return response.text()
  const reader = response.body.getReader()
  const decoder = new TextDecoder()
  let text = ""
  while (!text.includes("\n\n")) {
    const { done, value } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
  }
  abort.abort()
  return text
}

/** fetch against the test server; JSON bodies parsed when present. */
export const request = async (server: TestServer, method: string, path: string, options: RequestOptions = {}): Promise<Reply> => {
  const headers: Record<string, string> = { ...options.headers }
  if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`
  let body: string | undefined
  if (options.rawBody !== undefined) body = options.rawBody
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body)
    headers["content-type"] ??= "application/json"
  }
  const abort = new AbortController()
  const response = await fetch(server.baseUrl + path, { method, headers, signal: abort.signal, ...(body === undefined ? {} : { body }) })
  const text = await textOf(response, abort)
  let parsed: unknown = undefined
  if (text.length > 0) {
    try {
      parsed = JSON.parse(text)
    } catch {
      parsed = undefined
    }
  }
  return { status: response.status, headers: response.headers, body: parsed, text }
}

export const asOperator = (server: TestServer) => ({ bearer: server.operatorToken })

/** Provision a key through the operator endpoint, as an operator would. */
export const createKey = async (
  server: TestServer,
  scopes: ReadonlyArray<string>,
  extra: Record<string, unknown> = {}
): Promise<{ api_key: string; key_id: string; tenant_id: string }> => {
  const reply = await request(server, "POST", "/api/v1/api-keys", {
    ...asOperator(server),
    body: { tenant_id: "tenant-a", name: "test key", scopes, ...extra }
  })
  if (reply.status !== 201) throw new Error(`key creation failed: ${reply.status} ${reply.text}`)
  return reply.body
}

export const putDetermination = (server: TestServer, publicId: string, body: unknown) =>
  request(server, "PUT", `/api/v1/determinations/${publicId}`, { ...asOperator(server), body })

/**
 * docs/API.md §5.1: a non-2xx answer is problem+json with exactly type, title, status, detail,
 * code and optionally instance and errors (`[{ pointer, detail }]`), and leaks nothing internal.
 */
export const expectProblem = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.headers.get("content-type")).toMatch(/^application\/problem\+json\b/)
  const body = reply.body
  expect(body, reply.text).toBeTypeOf("object")
  for (const key of Object.keys(body)) expect(["type", "title", "status", "detail", "code", "instance", "errors"]).toContain(key)
  expect(body.type).toBe(`urn:pv:problem:${code}`)
  expect(body.code).toBe(code)
  expect(body.status).toBe(status)
  expect(body.title).toBeTypeOf("string")
  expect(body.title.length).toBeGreaterThan(0)
  expect(body.detail).toBeTypeOf("string")
  if ("instance" in body) expect(body.instance).toBeTypeOf("string")
  // docs/API.md §13: every response carries X-Request-Id; a problem's `instance` names that request.
  const requestId = reply.headers.get("x-request-id")
  expect(requestId, "X-Request-Id").toBeTruthy()
  if ("instance" in body) expect(body.instance).toBe(`urn:pv:request:${encodeURIComponent(requestId!)}`)
  if ("errors" in body) {
    expect(Array.isArray(body.errors)).toBe(true)
    for (const error of body.errors) {
      expect(Object.keys(error).sort()).toEqual(["detail", "pointer"])
      // RFC 6901: "" is the whole body, anything else starts with "/".
      expect(error.pointer).toMatch(/^(\/.*)?$/)
      expect(error.detail).toBeTypeOf("string")
    }
  }
  expect(reply.text).not.toMatch(/\bat .+:\d+:\d+|node_modules|\.ts:\d|stack|SqlError|SELECT |INSERT |syntax error at/i)
  return body
}

/** Reads `read()` every 100 ms until `done` holds of its value, which it returns; fails naming `what` after `timeoutMs`. */
export const until = async <A>(what: string, read: () => Promise<A>, done: (value: A) => boolean, timeoutMs = 15_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value)} after ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}
