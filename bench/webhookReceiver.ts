// A webhook receiver for bench/webhooks.ts, in its own process on loopback: it answers every delivery with
// the status given in argv[2] (204 by default; 500 for a receiver that always fails) as soon as the body is
// in, or argv[3] ms later (a receiver that hangs: 10000 outlasts the service's 10 s attempt time-out), and records when it arrived (wall clock, sub-millisecond, comparable with the bench process's) and
// which event it carried. No signature check: that costs the receiver, not the service being measured.
//   GET /_records?from=N → [[arrival_ms, public_id, version, occurred_at_ms, path], …] from the N-th on.
import { createServer } from "node:http"

const status = Number(process.argv[2] ?? "204")
const delayMs = Number(process.argv[3] ?? "0")
const now = () => performance.timeOrigin + performance.now()
const records: Array<[number, string, number, number, string]> = []

const server = createServer((req, res) => {
  if (req.method === "GET" && req.url?.startsWith("/_records")) {
    const from = Number(new URL(req.url, "http://x").searchParams.get("from") ?? "0")
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(records.slice(from)))
    return
  }
  const arrival = now()
  const chunks: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.on("end", () => {
    if (delayMs > 0) setTimeout(() => res.writeHead(status).end(), delayMs)
    else res.writeHead(status).end()
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as {
        event: { public_id: string; occurred_at: string; payload: { version?: number } }
      }
      records.push([arrival, body.event.public_id, body.event.payload.version ?? -1, Date.parse(body.event.occurred_at), req.url ?? ""])
    } catch {
      records.push([arrival, "", -1, Number.NaN, req.url ?? ""])
    }
  })
})
server.keepAliveTimeout = 1_000
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("no address")
  console.log(`listening on http://127.0.0.1:${address.port}`)
})
process.on("SIGTERM", () => process.exit(0))
