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
// This process's own CPU over the run (the load generator's cost, start-up excluded), in seconds.
const cpu0 = process.cpuUsage()
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
const cpu = process.cpuUsage(cpu0)
process.stdout.write(JSON.stringify({ ...result, generatorCpuSeconds: (cpu.user + cpu.system) / 1e6 }))
