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
  const response = await fetch(server.baseUrl + path, { method, headers, ...(body === undefined ? {} : { body }) })
  const text = await response.text()
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
