// Baseline (a): bare node:http answering a fixed 1 KB JSON.
import { createServer } from "node:http"
import { fixedJson } from "./fixed.js"

const body = Buffer.from(fixedJson)
const server = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length })
  res.end(body)
})
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  if (address !== null && typeof address === "object") console.log(`listening on http://127.0.0.1:${address.port}`)
})
