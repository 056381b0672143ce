// Baseline (r0): (r') without the framework's HTTP layer. Bare node:http: the key's SHA-256 looked up in a Map (as
// (b')'s bearer middleware), the body parsed and decoded through the service's RelianceRequest, the same work as
// (r') (./receiptWork.ts, run on an Effect runtime), and the answer encoded through NewRelianceReceipt and sent
// with status 201. (r') ÷ (r0) is what HttpApi, its middleware and its schemas cost a new receipt.
// DATABASE_URL: a database of its own (it creates its two tables); BENCH_KEY: the accepted key.
import { createServer, type ServerResponse } from "node:http"
import { ManagedRuntime, Result, Schema } from "effect"
import { NewRelianceReceipt, RelianceRequest } from "../../src/domain/Receipt.js"
import { sha256 } from "./bearer.js"
import { runBaseline } from "./cluster.js"
import { makeReceiptWork, ReceiptWorkLive } from "./receiptWork.js"

const keys = new Map([[sha256(process.env.BENCH_KEY!), { tenant_id: "bench" }]])
const decodeRequest = Schema.decodeUnknownResult(RelianceRequest)
const encodeAnswer = Schema.encodeSync(NewRelianceReceipt)
const statusOf = { forbidden: 403, "not-found": 404, conflict: 409 } as const

const answer = (res: ServerResponse, status: number, body = "") =>
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) }).end(body)

runBaseline((banner) => {
  const runtime = ManagedRuntime.make(ReceiptWorkLive)
  void runtime.runPromise(makeReceiptWork).then((work) => {
    const server = createServer((req, res) => {
      if (req.method !== "POST" || req.url !== "/api/v1/reliance-receipts") return answer(res, 404)
      const authorization = req.headers.authorization
      const caller = authorization?.startsWith("Bearer ") ? keys.get(sha256(authorization.slice(7))) : undefined
      if (caller === undefined) return answer(res, 401)
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => {
        let parsed: unknown
        try {
          parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        } catch {
          return answer(res, 400)
        }
        const payload = decodeRequest(parsed)
        if (Result.isFailure(payload)) return answer(res, 400)
        runtime.runPromise(work(caller.tenant_id, payload.success)).then(
          (made) => Result.isSuccess(made)
            ? answer(res, 201, JSON.stringify(encodeAnswer({ ...made.success, idempotent: false })))
            : answer(res, statusOf[made.failure]),
          () => answer(res, 500)
        )
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      if (address !== null && typeof address === "object") banner(address.port)
    })
  })
})
