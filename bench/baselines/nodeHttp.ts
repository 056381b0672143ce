// Baseline (a): bare node:http answering a fixed JSON (1 KB, or the file BENCH_DOCUMENT_FILE names: the CPU
// bench gives it a trust document, so (a) answers as many bytes as GET /machine), in `--workers N` processes.
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import { runBaseline } from "./cluster.js"
import { fixedJson } from "./fixed.js"

const body = process.env.BENCH_DOCUMENT_FILE === undefined ? Buffer.from(fixedJson) : readFileSync(process.env.BENCH_DOCUMENT_FILE)
runBaseline((banner) => {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json", "content-length": body.length })
    res.end(body)
  })
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    if (address !== null && typeof address === "object") banner(address.port)
  })
})
