// Baseline (a): bare node:http answering a fixed 1 KB JSON, in `--workers N` processes (default 1).
import { createServer } from "node:http"
import { runBaseline } from "./cluster.js"
import { fixedJson } from "./fixed.js"

const body = Buffer.from(fixedJson)
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
