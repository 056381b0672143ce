import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** One request a receiver got: when, what, and the raw body exactly as sent. */
export interface Received {
  readonly at: number
  readonly path: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

/**
 * What a receiver does with a request: answer a status (and body), after `delayMs` or once `until` settles
 * (a gate the test opens), hang, or close the connection.
 */
export type Behaviour =
  | {
    readonly kind: "answer"
    readonly status: number
    readonly body?: string
    readonly headers?: Record<string, string>
    readonly delayMs?: number
    readonly until?: Promise<unknown>
  }
  | { readonly kind: "hang" }
  | { readonly kind: "close" }

export interface Receiver {
  readonly url: (path?: string) => string
  readonly received: Array<Received>
  /** Requests in progress right now (received, not yet answered), and the most seen at once, per path. */
  readonly maxConcurrentByPath: Map<string, number>
  behaviour: (req: Received) => Behaviour
  /** Resolves once `count` requests to `path` (any path when undefined) have been received. */
  readonly waitFor: (count: number, path?: string, timeoutMs?: number) => Promise<ReadonlyArray<Received>>
  readonly close: () => Promise<void>
}

/** A real HTTP server on loopback standing in for a relying party's webhook endpoint. */
export const startReceiver = async (): Promise<Receiver> => {
  const received: Array<Received> = []
  const open = new Map<string, number>()
  const maxConcurrentByPath = new Map<string, number>()
  const waiters = new Set<() => void>()
  const hanging = new Set<Http.ServerResponse>()
  const receiver: Receiver = {
    url: (path = "/hook") => `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`,
    received,
    maxConcurrentByPath,
    behaviour: () => ({ kind: "answer", status: 204 }),
    waitFor: (count, path, timeoutMs = 10_000) =>
      new Promise((resolve, reject) => {
        const matching = () => received.filter((r) => path === undefined || r.path === path)
        const check = () => {
          if (matching().length >= count) {
            waiters.delete(check)
            clearTimeout(timer)
            resolve(matching())
          }
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`receiver: ${matching().length} of ${count} requests to ${path ?? "any path"} after ${timeoutMs} ms`))
        }, timeoutMs)
        waiters.add(check)
        check()
      }),
    close: () =>
      new Promise((resolve) => {
        for (const res of hanging) res.destroy()
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
  const server = Http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const path = req.url ?? "/"
      const record: Received = { at: Date.now(), path, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") }
      const now = (open.get(path) ?? 0) + 1
      open.set(path, now)
      maxConcurrentByPath.set(path, Math.max(now, maxConcurrentByPath.get(path) ?? 0))
      res.on("close", () => open.set(path, (open.get(path) ?? 1) - 1))
      received.push(record)
      for (const waiter of [...waiters]) waiter()
      const behaviour = receiver.behaviour(record)
      if (behaviour.kind === "hang") return void hanging.add(res)
      if (behaviour.kind === "close") return void req.socket.destroy()
      const answer = () => {
        res.writeHead(behaviour.status, behaviour.headers ?? {})
        res.end(behaviour.body ?? "")
      }
      const delayed = () => behaviour.delayMs === undefined ? answer() : void setTimeout(answer, behaviour.delayMs)
      if (behaviour.until === undefined) delayed()
      else void behaviour.until.finally(delayed)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return receiver
}
