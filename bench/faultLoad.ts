// Closed-loop load for the overload and drain scenarios, where autocannon's totals are not enough: latency
// is kept per status (the p99 of admitted requests, apart from fast refusals) and every request that was
// sent and never answered is counted as lost.
import { Agent, request as httpRequest } from "node:http"

export interface DriveOptions {
  readonly url: string
  readonly method?: string
  readonly headers?: Record<string, string>
  /** The body of the i-th request (so every receipt can be new). */
  readonly body?: (i: number) => string
  readonly connections: number
  readonly durationMs: number
  /** Called with each 2xx body, e.g. to remember acknowledged receipts. */
  readonly onSuccess?: (body: string) => void
  /** Wait out a 503's Retry-After before the next request on that connection, as a real client would. */
  readonly honourRetryAfter?: boolean
  /** Stops early (e.g. once the server has gone away). */
  readonly stopWhen?: () => boolean
}

export interface DriveResult {
  readonly sent: number
  readonly byStatus: Record<string, number>
  /** Sent, but the connection ended without an answer. */
  readonly lost: number
  /** Refused before anything was sent (connection refused): not lost, never accepted. */
  readonly refused: number
  readonly admittedPerSecond: number
  readonly admittedP50: number
  readonly admittedP99: number
  readonly refusalP99: number
}

const percentile = (sorted: ReadonlyArray<number>, q: number) => sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!

export const drive = async (options: DriveOptions): Promise<DriveResult> => {
  const byStatus: Record<string, number> = {}
  const admitted: Array<number> = []
  const refusals: Array<number> = []
  let sent = 0
  let lost = 0
  let refused = 0
  let next = 0
  const started = Date.now()
  const deadline = started + options.durationMs
  const one = (agent: Agent) =>
    new Promise<void>((resolve) => {
      const i = next++
      const body = options.body?.(i)
      const t0 = process.hrtime.bigint()
      let wrote = false
      const req = httpRequest(options.url, {
        agent,
        method: options.method ?? "GET",
        headers: { ...options.headers, ...(body === undefined ? {} : { "content-length": Buffer.byteLength(body) }) }
      }, (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => {
          const ms = Number(process.hrtime.bigint() - t0) / 1e6
          const status = res.statusCode ?? 0
          byStatus[status] = (byStatus[status] ?? 0) + 1
          if (status >= 200 && status < 300) {
            admitted.push(ms)
            options.onSuccess?.(Buffer.concat(chunks).toString())
          } else refusals.push(ms)
          // A well-behaved client waits as long as a 503 asks before its next request.
          const retryAfter = Number(res.headers["retry-after"] ?? "0")
          if (status === 503 && options.honourRetryAfter === true && retryAfter > 0) setTimeout(resolve, retryAfter * 1000)
          else resolve()
        })
        res.on("error", () => (lost++, resolve()))
      })
      req.on("finish", () => (wrote = true))
      req.on("error", (error: NodeJS.ErrnoException) => {
        if (!wrote || error.code === "ECONNREFUSED") refused++
        else lost++
        resolve()
      })
      sent++
      req.end(body)
    })
  await Promise.all(Array.from({ length: options.connections }, async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    while (Date.now() < deadline && !(options.stopWhen?.() ?? false)) await one(agent)
    agent.destroy()
  }))
  const seconds = (Date.now() - started) / 1000
  admitted.sort((a, b) => a - b)
  refusals.sort((a, b) => a - b)
  return {
    sent,
    byStatus,
    lost,
    refused,
    admittedPerSecond: admitted.length / seconds,
    admittedP50: percentile(admitted, 0.5),
    admittedP99: percentile(admitted, 0.99),
    refusalP99: percentile(refusals, 0.99)
  }
}
