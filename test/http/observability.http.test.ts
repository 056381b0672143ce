import * as Http from "node:http"
import { connect } from "node:net"
import { Result, Option, Redacted } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest"
import { testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody, relianceRequest } from "../support/fixtures.js"
import { asOperator, createKey, expectProblem, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { readConfig } from "../support/testConfig.js"

/**
 * Issue 13 items 1–3 / docs/API.md §13: X-Request-Id on every response (echoed,
 * replaced or generated) and in problem documents' `instance`; GET /metrics (Prometheus text, from
 * effect/observability's PrometheusMetrics) behind PV_METRICS_TOKEN; counters that move; one JSON log
 * line per request with PV_LOG_FORMAT=json; OTLP/HTTP spans per request and per SQL statement carrying
 * the request id.
 */

const kind = testDatabaseKind()
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const subject = "DET-V1-OBSERVE-0001"
const metricsToken = "metrics-token-0123456789"
const mcpHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }

const receiptBody = (principal: string) => relianceRequest(subject, principal)

/** The sum of a metric's samples whose labels include `labels` (0 when no such series exists yet). */
const sample = (exposition: string, name: string, labels: Record<string, string> = {}): number => {
  let sum = 0
  for (const line of exposition.split("\n")) {
    if (!line.startsWith(name + "{") && !line.startsWith(name + " ")) continue
    const open = line.indexOf("{")
    const labelText = open === -1 ? "" : line.slice(open + 1, line.lastIndexOf("}"))
    if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(" ") + 1))
  }
  return sum
}

/** One whole response to bytes written straight on a socket (for the HTTP parser's own refusals). */
const rawExchange = (server: TestServer, bytes: string) =>
  new Promise<string>((resolve, reject) => {
    const url = new URL(server.baseUrl)
    const socket = connect({ host: url.hostname, port: Number(url.port) })
    let received = ""
    socket.setEncoding("latin1")
    socket.on("data", (chunk: string) => (received += chunk))
    socket.on("end", () => resolve(received))
    socket.on("error", reject)
    socket.write(bytes)
  })

describe("observability settings", () => {
  it("defaults to text logs, no metrics token, no tracing, service name pv-trust-service", () => {
    const config = Result.getOrThrow(readConfig({}))
    expect(config.logFormat).toBe("text")
    expect(Option.isNone(config.metricsToken)).toBe(true)
    expect(Option.isNone(config.otlpEndpoint)).toBe(true)
    expect(config.otelServiceName).toBe("pv-trust-service")
  })

  it("reads and validates PV_LOG_FORMAT, PV_METRICS_TOKEN, OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_SERVICE_NAME", () => {
    const config = Result.getOrThrow(readConfig({
      PV_LOG_FORMAT: "json",
      PV_METRICS_TOKEN: "x".repeat(16),
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
      OTEL_SERVICE_NAME: "pv-eu-1"
    }))
    expect(config.logFormat).toBe("json")
    expect(Option.map(config.metricsToken, Redacted.value)).toEqual(Option.some("x".repeat(16)))
    expect(String(config.metricsToken)).not.toContain("xxxx")
    expect(config.otlpEndpoint).toEqual(Option.some("http://collector:4318"))
    expect(config.otelServiceName).toBe("pv-eu-1")
    expect(Option.isNone(Result.getOrThrow(readConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "" })).otlpEndpoint)).toBe(true)
    for (const [name, value] of [["PV_LOG_FORMAT", "xml"], ["PV_METRICS_TOKEN", "x".repeat(15)], ["OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"]]) {
      const read = readConfig({ [name!]: value! })
      expect(Result.isFailure(read), name).toBe(true)
      if (Result.isFailure(read)) expect(String(read.failure)).toContain(name)
    }
  })
})

describe(`request ids (${kind})`, () => {
  let server: TestServer
  let key: string
  beforeAll(async () => {
    server = await startTestServer()
    expect((await putDetermination(server, subject, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
    key = (await createKey(server, ["trust:read", "mcp:call"])).api_key
  })
  afterAll(() => server?.close())

  it("echoes a client's id of visible ASCII up to 128 characters", async () => {
    for (const sent of ["abc-123", "req:7/x?y=z!~", "x".repeat(128), "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"]) {
      const reply = await request(server, "GET", "/healthz", { headers: { "x-request-id": sent } })
      expect(reply.status).toBe(200)
      expect(reply.headers.get("x-request-id")).toBe(sent)
    }
  })

  it("replaces an id that is too long or holds other characters, and generates one when none is sent", async () => {
    const seen = new Set<string>()
    for (const sent of ["x".repeat(129), "a b", "caf\u00e9", undefined]) {
      const reply = await request(server, "GET", "/healthz", sent === undefined ? {} : { headers: { "x-request-id": sent } })
      const id = reply.headers.get("x-request-id")!
      expect(id).toMatch(uuid)
      seen.add(id)
    }
    expect(seen.size).toBe(4)
  })

  it("carries the id on success and in a REST problem's instance", async () => {
    const ok = await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: key, headers: { "x-request-id": "trace-ok-1" } })
    expect(ok.status).toBe(200)
    expect(ok.headers.get("x-request-id")).toBe("trace-ok-1")
    const refused = await request(server, "GET", `/api/v1/trust/${subject}/machine`, { headers: { "x-request-id": "trace-401" } })
    expect(expectProblem(refused, 401, "unauthorized").instance).toBe("urn:pv:request:trace-401")
    const missing = await request(server, "GET", "/api/v1/no-such-thing")
    expect(expectProblem(missing, 404, "not-found").instance).toBe(`urn:pv:request:${missing.headers.get("x-request-id")}`)
    // A client-chosen id is percent-encoded into the URN.
    const odd = await request(server, "GET", "/api/v1/no-such-thing", { headers: { "x-request-id": "a/b?c#d" } })
    expect(expectProblem(odd, 404, "not-found").instance).toBe("urn:pv:request:a%2Fb%3Fc%23d")
  })

  it("carries the id on MCP answers, JSON-RPC and problem alike", async () => {
    const ping = await request(server, "POST", "/api/v1/mcp", {
      bearer: key,
      rawBody: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
      headers: { ...mcpHeaders, "x-request-id": "mcp-ping-1" }
    })
    expect(ping.status, ping.text).toBe(200)
    expect(ping.headers.get("x-request-id")).toBe("mcp-ping-1")
    const get = await request(server, "GET", "/api/v1/mcp", { bearer: key, headers: { "x-request-id": "mcp-get-1" } })
    expect(expectProblem(get, 405, "method-not-allowed").instance).toBe("urn:pv:request:mcp-get-1")
  })

  it("carries the id on the front door's own refusals", async () => {
    const foreign = await request(server, "GET", `/api/v1/trust/${subject}/machine`, {
      bearer: key,
      headers: { origin: "https://evil.example", "x-request-id": "origin-1" }
    })
    expect(expectProblem(foreign, 403, "origin-not-allowed").instance).toBe("urn:pv:request:origin-1")
    const expectation = await rawExchange(server, "GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: nonsense\r\nX-Request-Id: expect-1\r\n\r\n")
    expect(expectation).toMatch(/^HTTP\/1\.1 417 /)
    expect(expectation).toMatch(/\r\nx-request-id: expect-1\r\n/i)
    // The parser's refusal is written on the raw socket, with a generated id in the header and the body.
    const garbage = await rawExchange(server, "NOT A REQUEST\r\n\r\n")
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /)
    const id = /\r\nX-Request-Id: ([^\r]+)\r\n/.exec(garbage)?.[1]
    expect(id).toMatch(uuid)
    expect(JSON.parse(garbage.slice(garbage.indexOf("\r\n\r\n") + 4)).instance).toBe(`urn:pv:request:${id}`)
  })
})

describe(`metrics (${kind})`, () => {
  let server: TestServer
  let guarded: TestServer
  let writer: { api_key: string; key_id: string }
  // Counters are the process's (earlier files' servers in this worker too): the log's is read as a delta.
  let integratedAtStart = 0
  const scrape = async (target: TestServer = server) => {
    const reply = await request(target, "GET", "/metrics", target === guarded ? { bearer: metricsToken } : {})
    expect(reply.status, reply.text).toBe(200)
    return reply.text
  }
  beforeAll(async () => {
    server = await startTestServer()
    integratedAtStart = sample(await scrape(), "pv_log_entries_integrated_total")
    // Log gauges are per process (one server in production): only `server`'s integrator runs rounds here.
    guarded = await startTestServer({ config: { metricsToken: Option.some(Redacted.make(metricsToken)), logIntegrationIntervalMs: 0 } })
    expect((await putDetermination(server, subject, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
    writer = await createKey(server, ["receipt:write", "trust:read"])
  })
  afterAll(async () => {
    await server?.close()
    await guarded?.close()
  })

  it("serves the Prometheus text format on the service port without a token when none is configured", async () => {
    await request(server, "GET", "/healthz")
    const reply = await request(server, "GET", "/metrics")
    expect(reply.status).toBe(200)
    expect(reply.headers.get("content-type")).toMatch(/^text\/plain/)
    expect(reply.headers.get("x-request-id")).toMatch(uuid)
    expect(reply.text).toContain("# TYPE pv_http_requests_total counter")
    expect(reply.text).toContain("# TYPE pv_http_request_duration_seconds histogram")
    expect(sample(reply.text, "pv_http_requests_total", { route: "/healthz", method: "GET", status: "200" })).toBeGreaterThan(0)
    expect(sample(reply.text, "pv_http_request_duration_seconds_bucket", { route: "/healthz", le: "+Inf" })).toBeGreaterThan(0)
    for (const gauge of ["pv_db_pool_connections", "pv_db_circuit_open", "pv_process_memory_bytes"]) {
      expect(reply.text).toContain(`# TYPE ${gauge} gauge`)
    }
    expect(sample(reply.text, "pv_db_pool_connections", { state: "total" })).toBeGreaterThan(0)
    expect(sample(reply.text, "pv_db_circuit_open")).toBe(0)
    expect(sample(reply.text, "pv_process_memory_bytes", { type: "rss" })).toBeGreaterThan(1_000_000)
    const method = await request(server, "POST", "/metrics", { body: {} })
    expectProblem(method, 405, "method-not-allowed")
    expect(method.headers.get("allow")).toBe("GET, HEAD")
  })

  it("requires PV_METRICS_TOKEN as a bearer token when it is set (401 problem otherwise)", async () => {
    for (const bearer of [undefined, "wrong-token-0123456789", metricsToken + "x", server.operatorToken]) {
      const refused = await request(guarded, "GET", "/metrics", bearer === undefined ? {} : { bearer })
      expectProblem(refused, 401, "unauthorized")
      expect(refused.headers.get("www-authenticate")).toMatch(/^Bearer /)
      expect(refused.text).not.toContain("pv_http_requests_total")
    }
    const lower = await request(guarded, "GET", "/metrics", { headers: { authorization: `bearer ${metricsToken}` } })
    expect(lower.status).toBe(200)
    expect(await scrape(guarded)).toContain("pv_http_requests_total")
  })

  it("counts requests per route pattern and status, not per path", async () => {
    const before = await scrape()
    const route = "/api/v1/trust/:publicId/machine"
    await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: writer.api_key })
    await request(server, "GET", "/api/v1/trust/DET-V1-OBSERVE-9999/machine", { bearer: writer.api_key })
    await request(server, "GET", `/api/v1/trust/${subject}/machine`)
    const after = await scrape()
    const delta = (labels: Record<string, string>) => sample(after, "pv_http_requests_total", labels) - sample(before, "pv_http_requests_total", labels)
    expect(delta({ route, method: "GET", status: "200" })).toBe(1)
    expect(delta({ route, method: "GET", status: "404" })).toBe(1)
    expect(delta({ route, method: "GET", status: "401" })).toBe(1)
    expect(after).not.toContain(`route="/api/v1/trust/${subject}/machine"`)
  })

  it("counts receipts created and replayed, events appended and rate-limit rejections", async () => {
    const before = await scrape()
    const created = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: writer.api_key, body: receiptBody("agent:metrics") })
    expect(created.status, created.text).toBe(201)
    let after = await scrape()
    expect(sample(after, "pv_receipts_created_total") - sample(before, "pv_receipts_created_total")).toBe(1)
    expect(sample(after, "pv_receipts_replayed_total") - sample(before, "pv_receipts_replayed_total")).toBe(0)
    const replayed = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: writer.api_key, body: receiptBody("agent:metrics") })
    expect(replayed.status, replayed.text).toBe(200)
    const afterReplay = await scrape()
    expect(sample(afterReplay, "pv_receipts_created_total") - sample(after, "pv_receipts_created_total")).toBe(0)
    expect(sample(afterReplay, "pv_receipts_replayed_total") - sample(after, "pv_receipts_replayed_total")).toBe(1)

    const changed = await putDetermination(server, subject, determinationBody(Date.now() - DAY_MS, { tier: "T1" }))
    expect(changed.status, changed.text).toBe(200)
    after = await scrape()
    const events = (text: string) => sample(text, "pv_events_appended_total")
    expect(events(after) - events(afterReplay)).toBeGreaterThanOrEqual(1)

    const limited = await createKey(server, ["trust:read"], { rate_limit_per_minute: 1 })
    expect((await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: limited.api_key })).status).toBe(200)
    expectProblem(await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: limited.api_key }), 429, "rate-limited")
    const afterLimit = await scrape()
    expect(sample(afterLimit, "pv_rate_limit_rejections_total", { limit: "key" }) - sample(after, "pv_rate_limit_rejections_total", { limit: "key" })).toBe(1)

    const quota = await createKey(server, ["trust:read"], { daily_quota: 1 })
    expect((await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: quota.api_key })).status).toBe(200)
    expectProblem(await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: quota.api_key }), 429, "quota-exceeded")
    const afterQuota = await scrape()
    expect(sample(afterQuota, "pv_quota_rejections_total") - sample(afterLimit, "pv_quota_rejections_total")).toBe(1)
  })

  it("reports the transparency log's size and integration lag once the integrator has run", async () => {
    // This server's log size, from its own checkpoint (the gauge must show it, not an earlier server's value).
    const checkpointSize = async () => {
      const reply = await request(server, "GET", "/log/checkpoint")
      return reply.status === 200 ? Number(reply.text.split("\n")[1]) : 0
    }
    let text = await scrape()
    let size = await checkpointSize()
    // The receipt and events above are integrated by the next round (every 250 ms).
    for (let i = 0; i < 40 && (size === 0 || sample(text, "pv_log_size") !== size); i++) {
      await new Promise((r) => setTimeout(r, 50))
      text = await scrape()
      size = await checkpointSize()
    }
    expect(text).toContain("# TYPE pv_log_size gauge")
    expect(size).toBeGreaterThan(0)
    expect(sample(text, "pv_log_size")).toBe(size)
    expect(text).toContain("# TYPE pv_log_integration_lag_seconds gauge")
    expect(sample(text, "pv_log_integration_lag_seconds")).toBeGreaterThanOrEqual(0)
    expect(sample(text, "pv_log_entries_integrated_total") - integratedAtStart).toBeGreaterThan(0)
  })
})

describe(`JSON request log (${kind})`, () => {
  let server: TestServer
  let lines: Array<string>
  const write = process.stdout.write.bind(process.stdout)
  beforeAll(async () => {
    server = await startTestServer({ config: { logFormat: "json" } })
  })
  afterEach(() => vi.restoreAllMocks())
  afterAll(() => server?.close())

  const capture = () => {
    lines = []
    vi.spyOn(process.stdout, "write").mockImplementation(((chunk: string | Uint8Array, ...rest: Array<unknown>) => {
      const text = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8")
      if (text.startsWith("{\"time\"")) {
        lines.push(...text.split("\n").filter((l) => l.length > 0))
        return true
      }
      return (write as (...a: Array<unknown>) => boolean)(chunk, ...rest)
    }) as typeof process.stdout.write)
  }
  const lineOf = (requestId: string) => {
    const found = lines.map((line) => JSON.parse(line)).filter((entry) => entry.request_id === requestId)
    expect(found, `log lines for ${requestId}: ${lines.join("\n")}`).toHaveLength(1)
    return found[0]
  }
  /** The line is written when the response's connection is done with it: poll briefly. */
  const waitFor = async (requestId: string) => {
    for (let i = 0; i < 50 && !lines.some((l) => l.includes(`"request_id":${JSON.stringify(requestId)}`)); i++) await new Promise((r) => setTimeout(r, 10))
    return lineOf(requestId)
  }

  it("writes one line per request: time, request id, method, route pattern, status, duration, key id and tenant, never the key", async () => {
    capture()
    const key = await createKey(server, ["trust:read"], { tenant_id: "tenant-log" })
    expect((await putDetermination(server, subject, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
    const started = Date.now()
    const ok = await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: key.api_key, headers: { "x-request-id": "log-ok-1" } })
    expect(ok.status).toBe(200)
    const entry = await waitFor("log-ok-1")
    expect(Object.keys(entry).sort()).toEqual(["duration_ms", "key_id", "method", "request_id", "route", "status", "tenant_id", "time"])
    expect(entry).toMatchObject({
      request_id: "log-ok-1",
      method: "GET",
      route: "/api/v1/trust/:publicId/machine",
      status: 200,
      key_id: key.key_id,
      tenant_id: "tenant-log"
    })
    expect(entry.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(Math.abs(Date.parse(entry.time) - started)).toBeLessThan(5_000)
    expect(entry.duration_ms).toBeTypeOf("number")
    expect(entry.duration_ms).toBeGreaterThanOrEqual(0)

    // A refused key still has no key material in the line; an operator request has no key id.
    const refused = await request(server, "GET", `/api/v1/trust/${subject}/machine`, { bearer: key.api_key + "x", headers: { "x-request-id": "log-401" } })
    expect(refused.status).toBe(401)
    expect(await waitFor("log-401")).toMatchObject({ route: "/api/v1/trust/:publicId/machine", status: 401, key_id: null, tenant_id: null })
    const operator = await request(server, "GET", "/api/v1/api-keys?tenant_id=tenant-log", { ...asOperator(server), headers: { "x-request-id": "log-op" } })
    expect(operator.status).toBe(200)
    expect(await waitFor("log-op")).toMatchObject({ route: "/api/v1/api-keys", status: 200, key_id: null })
    for (const line of lines) {
      expect(line).not.toContain(key.api_key)
      expect(line).not.toContain("pv_live_")
      expect(line).not.toContain(server.operatorToken)
    }
  })

  it("logs requests the front door answers itself, and requests no route matched, with their path", async () => {
    capture()
    const foreign = await request(server, "GET", `/api/v1/trust/${subject}/machine`, { headers: { origin: "https://evil.example", "x-request-id": "log-origin" } })
    expect(foreign.status).toBe(403)
    expect(await waitFor("log-origin")).toMatchObject({ route: null, path: `/api/v1/trust/${subject}/machine`, status: 403, method: "GET" })
    await request(server, "GET", "/nowhere?x=1", { headers: { "x-request-id": "log-404" } })
    expect(await waitFor("log-404")).toMatchObject({ route: null, path: "/nowhere", status: 404 })
    await request(server, "GET", "/metrics", { headers: { "x-request-id": "log-metrics" } })
    expect(await waitFor("log-metrics")).toMatchObject({ route: "/metrics", status: 200 })
  })

  it("writes no per-request lines in the default text format", async () => {
    const quiet = await startTestServer({ config: { logFormat: "text" } })
    try {
      capture()
      await request(quiet, "GET", "/healthz", { headers: { "x-request-id": "log-quiet" } })
      await new Promise((r) => setTimeout(r, 50))
      expect(lines).toEqual([])
    } finally {
      await quiet.close()
    }
  })
})

interface OtlpSpan {
  readonly name: string
  readonly attributes?: ReadonlyArray<{ readonly key: string; readonly value: { readonly stringValue?: string } }>
}

describe(`OTLP traces (${kind})`, () => {
  it("exports a span per request and per SQL statement, with the request id, over OTLP/HTTP", async () => {
    const received: Array<OtlpSpan> = []
    const paths: Array<string> = []
    const collector = Http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => {
        paths.push(`${req.method} ${req.url} ${req.headers["content-type"]}`)
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        for (const resource of body.resourceSpans ?? []) {
          for (const scope of resource.scopeSpans ?? []) received.push(...(scope.spans ?? []))
        }
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      })
    })
    await new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", resolve))
    const port = (collector.address() as { port: number }).port
    const server = await startTestServer({ config: { otlpEndpoint: Option.some(`http://127.0.0.1:${port}`) } })
    try {
      const put = await putDetermination(server, subject, determinationBody(Date.now() - DAY_MS))
      expect(put.status, put.text).toBe(201)
      const traced = await request(server, "PUT", `/api/v1/determinations/${subject}`, {
        ...asOperator(server),
        body: determinationBody(Date.now() - DAY_MS, { tier: "T1" }),
        headers: { "x-request-id": "trace-put-1" }
      })
      expect(traced.status, traced.text).toBe(200)
    } finally {
      // Stopping flushes the batch processor.
      await server.close()
      await new Promise<void>((resolve) => collector.close(() => resolve()))
    }
    expect(paths.length).toBeGreaterThan(0)
    expect(paths[0]).toMatch(/^POST \/v1\/traces application\/json/)
    const attribute = (span: OtlpSpan, key: string) => span.attributes?.find((a) => a.key === key)?.value.stringValue
    const ofRequest = received.filter((span) => attribute(span, "pv.request_id") === "trace-put-1")
    const serverSpan = ofRequest.find((span) => span.name.startsWith("http.server"))
    expect(serverSpan, `spans: ${received.map((s) => s.name).join(", ")}`).toBeDefined()
    expect(attribute(serverSpan!, "http.route")).toBe("/api/v1/determinations/:publicId")
    expect(attribute(serverSpan!, "http.request.header.authorization")).not.toContain(server.operatorToken)
    expect(ofRequest.filter((span) => span.name === "sql.execute").length).toBeGreaterThan(0)
  })
})
