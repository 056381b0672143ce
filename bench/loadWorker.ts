// The load generator, in its own process: autocannon driven programmatically (so each request can carry
// a unique body), printing autocannon's JSON result on stdout. Options arrive as JSON in argv[2].
import autocannon from "autocannon"

const options = JSON.parse(process.argv[2]!) as {
  url: string
  connections: number
  seconds: number
  /** When set, exactly this many requests (then `seconds` is ignored). */
  amount?: number
  method?: string
  headers?: Record<string, string>
  body?: string
  idReplacement?: boolean
  rate?: number
}

let counter = 0
const unique = `${process.pid}-${Date.now()}`
const result = await autocannon({
  url: options.url,
  connections: options.connections,
  ...(options.rate !== undefined ? { overallRate: options.rate } : {}),
  ...(options.amount !== undefined ? { amount: options.amount } : { duration: options.seconds }),
  method: (options.method ?? "GET") as "GET",
  headers: options.headers ?? {},
  ...(options.body !== undefined && !options.idReplacement ? { body: options.body } : {}),
  ...(options.idReplacement && options.body !== undefined
    ? {
      requests: [{
        setupRequest: (request: any) => ({ ...request, body: options.body!.replaceAll("[<id>]", `${unique}-${counter++}`) })
      }]
    }
    : {})
})
process.stdout.write(JSON.stringify(result))
