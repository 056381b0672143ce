import cluster from "node:cluster"

/** The server, loaded only in the process that serves (a cluster primary only forks and watches). */
const serve = async () => {
  const [{ runMain }, { Cause, Exit, Layer, Runtime }, { AppConfigLive }, { ServerLive }] = await Promise.all([
    import("@effect/platform-node/NodeRuntime"),
    import("effect"),
    import("../platform/Config.js"),
    import("./Server.js")
  ])
  ServerLive.pipe(
    Layer.provide(AppConfigLive),
    Layer.launch,
    // A stop by signal (SIGTERM, SIGINT) interrupts the server, which drains and closes: that is a clean
    // exit (0), as supervisors expect, not the 130 runMain would report. A failure still exits 1.
    (program) =>
      runMain(program, {
        teardown: (exit, onExit) =>
          Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)
      })
  )
}

/**
 * Serve in this process, or with `workers` > 1 fork that many processes sharing one listening socket
 * (node:cluster), so one machine's cores are used. Workers share the database, so they need PostgreSQL
 * (the embedded database belongs to one process); rate limits, key revocation and cached trust
 * documents already work across instances. A worker that dies is replaced; SIGTERM/SIGINT make every
 * worker drain, and the primary exits 0 once they have.
 */
export const launch = (workers: number): void => {
  if (workers <= 1 || cluster.isWorker) {
    void serve()
    return
  }
  if (!process.env.DATABASE_URL) {
    console.error("PV_WORKERS / --workers above 1 needs DATABASE_URL: the embedded database belongs to one process.")
    process.exitCode = 1
    return
  }
  let stopping = false
  let exitCode = 0
  const fork = (index: number) => cluster.fork({ PV_BANNER: index === 0 ? (process.env.PV_BANNER ?? "true") : "false", PV_WORKER_INDEX: String(index) })
  const indexOf = new Map<number, number>()
  for (let i = 0; i < workers; i++) indexOf.set(fork(i).id, i)
  const listening = new Set<number>()
  cluster.on("listening", (worker) => listening.add(worker.id))
  cluster.on("exit", (worker, code, signal) => {
    const index = indexOf.get(worker.id) ?? 0
    indexOf.delete(worker.id)
    if (stopping) {
      if (indexOf.size === 0) process.exit(exitCode)
      return
    }
    // A worker that dies before it ever listened failed to start (bad configuration, database gone):
    // restarting it would loop forever, so stop everything and let the supervisor see the failure.
    if (!listening.has(worker.id)) {
      console.error(`worker ${index} failed to start (${signal ?? code}); stopping`)
      exitCode = 1
      stop()
      return
    }
    listening.delete(worker.id)
    console.error(`worker ${index} exited (${signal ?? code}); starting a new one`)
    indexOf.set(fork(index).id, index)
  })
  // Each worker drains itself on SIGTERM (http/FrontDoor.ts); one that outlives its grace is killed. The
  // margin covers the closing steps after the grace: interrupting a statement in @effect/sql-pg waits for
  // its cancel request and the connection to drain (up to ~5 s), then the log's last round and the flushes.
  const stop = () => {
    if (stopping) return
    stopping = true
    const workersLeft = Object.values(cluster.workers ?? {})
    if (workersLeft.length === 0) process.exit(exitCode)
    for (const worker of workersLeft) worker?.process.kill("SIGTERM")
    setTimeout(() => {
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGKILL")
    }, shutdownGraceMs() + 12_000).unref()
  }
  process.on("SIGTERM", stop)
  process.on("SIGINT", stop)
}

const shutdownGraceMs = () => {
  const value = Number(process.env.PV_SHUTDOWN_GRACE_MS ?? "10000")
  return Number.isFinite(value) && value > 0 ? value : 10_000
}

export const workersFromEnv = (): number => {
  const value = Number(process.env.PV_WORKERS ?? "1")
  if (!Number.isInteger(value) || value < 1) {
    console.error("PV_WORKERS must be a positive integer")
    process.exit(1)
  }
  return value
}
