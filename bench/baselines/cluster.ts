// Runs a baseline server in `--workers N` processes sharing one listening socket (node:cluster), as the
// service does with PV_WORKERS, so a ratio against a baseline compares equal numbers of processes. With
// one worker the server runs in this process. The banner `listening on http://…` is printed once, when
// every process listens; SIGTERM stops them all.
import cluster from "node:cluster"
import { parseArgs } from "node:util"

export const baselineWorkers = (): number => {
  const { values } = parseArgs({ options: { workers: { type: "string", default: "1" } }, strict: false })
  const workers = Number(values.workers)
  if (!Number.isInteger(workers) || workers < 1) throw new Error(`--workers must be a positive integer, not ${String(values.workers)}`)
  return workers
}

/** `serve(banner)` starts the server; it calls `banner(port)` once it listens (a worker stays silent: the primary prints). */
export const runBaseline = (serve: (banner: (port: number) => void) => void): void => {
  const workers = baselineWorkers()
  const print = (port: number) => console.log(`listening on http://127.0.0.1:${port}`)
  if (workers <= 1) return serve(print)
  if (cluster.isWorker) return serve(() => {})
  const listening = new Set<number>()
  cluster.on("listening", (worker, address) => {
    listening.add(worker.id)
    if (listening.size === workers) print(address.port)
  })
  cluster.on("exit", () => {
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0)
  })
  for (let i = 0; i < workers; i++) cluster.fork()
  const stop = () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGTERM")
  }
  process.on("SIGTERM", stop)
  process.on("SIGINT", stop)
}
