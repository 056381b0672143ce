// Baseline (s): bare node:http answering recorded answers, each with the same bytes and the same headers as the
// service's (BENCH_ANSWERS_FILE: a JSON object, request target → { headers, body (base64) }), as a static file
// server with its files in memory would: what serving the log's reads (tiles, bundles, the checkpoint, the key)
// costs at least. Any other target is 404.
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import { runBaseline } from "./cluster.js"

const recorded = JSON.parse(readFileSync(process.env.BENCH_ANSWERS_FILE!, "utf8")) as Record<string, { headers: Record<string, string>; body: string }>
const answers = new Map(Object.entries(recorded).map(([target, { headers, body }]) => {
  const bytes = Buffer.from(body, "base64")
  return [target, { headers: { ...headers, "content-length": bytes.length }, bytes }] as const
}))
runBaseline((banner) => {
  const server = createServer((req, res) => {
    const answer = answers.get(req.url ?? "")
    if (answer === undefined) {
      res.writeHead(404, { "content-length": 0 })
      return void res.end()
    }
    res.writeHead(200, answer.headers)
    res.end(answer.bytes)
  })
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    if (address !== null && typeof address === "object") banner(address.port)
  })
})
