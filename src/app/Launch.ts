import cluster, { type Worker } from "node:cluster"
import * as Net from "node:net"
import { setFlagsFromString } from "node:v8"
import { Cause, ConfigProvider, Effect, Exit, Layer, Option, Runtime } from "effect"
import {
  closingTurn,
  ConnectionMessage,
  type ConnectionsAsk,
  DrainMessage,
  isClusterMessage,
  type MetricsCollect,
  type MetricsGathered,
  MetricsGatherMs,
  ReadyMessage
} from "../platform/Cluster.js"
import { launchSettings, type LaunchSettings } from "../platform/Config.js"

/** The server, loaded only in the process that serves (a cluster primary only forks and watches). */
const serve = async () => {
  // No allocation-site pretenuring: a request's objects are short-lived, and once V8 has seen most objects of
  // a site survive a young-generation collection it allocates that site's objects in the old generation,
  // where, dead, they keep what they point to alive through every young-generation collection until a full
  // one. An MCP tools/call's reply text (~4 KB, new per call) was promoted that way on nearly every call:
  // about 45 MB per 10,000 calls and four full collections, against 7 MB and one without (GET /machine:
  // 7 MB and one either way). Set before the server's modules load, so it holds for all of them.
  setFlagsFromString("--no-allocation-site-pretenuring")
  const [{ runMain }, { AppConfig }] = await Promise.all([
    import("@effect/platform-node/NodeRuntime"),
    import("../platform/Config.js")
  ])
  // The server's modules load once the settings are read: a start refused for its settings loads none of them
  // (a refusal took ~1.1 CPU-s with them, most of it loading them).
  Layer.unwrap(Effect.promise(() => import("./Server.js")).pipe(Effect.map(({ ServerLive }) => ServerLive))).pipe(
    Layer.provide(AppConfig.layer),
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
 * Serve in this process, or with `workers` > 1 fork that many processes and serve through them, so one
 * machine's cores are used. Workers share the database, so they need PostgreSQL (the embedded database
 * belongs to one process); rate limits, key revocation and cached trust documents already work across
 * instances. A worker that dies is replaced; SIGTERM/SIGINT make every worker drain, and the primary
 * exits 0 once they have.
 *
 * The primary owns the listening socket and hands each accepted connection to the next ready worker, in
 * turn (node:cluster's own round robin is not used: when its workers close their servers during a
 * drain, connections its primary already accepted are handed to a worker that has stopped, or closed
 * with the last one, and reset). On stop the primary holds the connections it accepts until accepting
 * has gone quiet, then stops accepting (new connects are refused), hands the held ones over and tells
 * every worker to drain: the connections it handed over reach a worker before that message, on the same
 * channel (node's IPC queues messages behind a socket in flight), so each is answered (503 with
 * `Connection: close` once draining), none reset.
 */
export const launch = (settings: LaunchSettings): void => {
  const { workers, host, port } = settings
  if (workers <= 1 || cluster.isWorker) {
    void serve()
    return
  }
  if (Option.isNone(settings.databaseUrl)) {
    console.error("PV_WORKERS / --workers above 1 needs DATABASE_URL: the embedded database belongs to one process.")
    process.exitCode = 1
    return
  }
  let stopping = false
  let exitCode = 0
  const indexOf = new Map<number, number>()
  /** Workers that said they can serve, in the order connections go to them. */
  const ready: Array<Worker> = []
  let turn = 0
  /** Connections accepted before any worker was ready, or while a stopping primary waits to close (closeListener). */
  const waiting: Array<Net.Socket> = []
  let holding = false
  /** While holding: each ready worker's count of the connections handed to it still open. */
  const handedOpen = new Map<number, number>()
  const everReady = new Set<number>()

  const listener = Net.createServer({ pauseOnConnect: true, noDelay: true })
  const dispatch = (socket: Net.Socket, attempts = 0): void => {
    if (socket.destroyed) return
    if (holding) {
      waiting.push(socket)
      return
    }
    if (ready.length === 0) {
      if (stopping) socket.destroy()
      else waiting.push(socket)
      return
    }
    const worker = ready[turn++ % ready.length]!
    // keepOpen: on a failed send (the worker just died) the socket goes to another worker; once sent,
    // the worker holds its own descriptor and the primary's is closed.
    worker.send(ConnectionMessage, socket, { keepOpen: true }, (error) => {
      if (error === null || error === undefined) socket.destroy()
      else if (attempts < workers) dispatch(socket, attempts + 1)
      else socket.destroy()
    })
  }
  let acceptedThisTurn = 0
  listener.on("connection", (socket) => {
    acceptedThisTurn++
    dispatch(socket)
  })
  // Once listening, an error is a failed accept (EMFILE, …): that connection is lost, the others are served.
  listener.on("error", (error) => {
    if (listener.listening) console.error(`accepting a connection failed: ${error.message}`)
  })
  const listen = (then: () => void) => {
    const refused = (error: Error) => {
      console.error(`cannot listen on ${host}:${port}: ${error.message}`)
      exitCode = 1
      stop()
    }
    listener.once("error", refused)
    listener.listen({ host, port }, () => {
      listener.off("error", refused)
      then()
    })
  }

  // Metrics gathers (observability/Telemetry.ts): a worker asks, every ready worker answers with its text.
  let gathers = 0
  const pending = new Map<number, (text: { worker: string; text: string }) => void>()
  const gather = (requester: Worker, requestId: number) => {
    const id = ++gathers
    const texts: Array<{ worker: string; text: string }> = []
    const asked = ready.filter((worker) => worker.isConnected())
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      pending.delete(id)
      const reply: MetricsGathered = { pv: "metrics:gathered", id: requestId, expected: workers, texts }
      if (requester.isConnected()) requester.send(reply)
    }
    const timer = setTimeout(finish, MetricsGatherMs)
    pending.set(id, (text) => {
      texts.push(text)
      if (texts.length >= asked.length) finish()
    })
    const collect: MetricsCollect = { pv: "metrics:collect", id }
    for (const worker of asked) worker.send(collect)
    if (asked.length === 0) finish()
  }
  const fork = (index: number) => {
    const worker = cluster.fork({
      PV_BANNER: index === 0 ? String(settings.banner) : "false",
      PV_WORKER_INDEX: String(index),
      PV_WORKERS: String(workers),
      PORT: String(listener.address() === null ? port : (listener.address() as Net.AddressInfo).port)
    })
    indexOf.set(worker.id, index)
    worker.on("message", (message: unknown) => {
      if (message === ReadyMessage) {
        everReady.add(worker.id)
        if (stopping) {
          worker.send(DrainMessage)
          return
        }
        ready.push(worker)
        if (!listener.listening) listen(() => undefined)
        for (const socket of waiting.splice(0)) dispatch(socket)
      } else if (isClusterMessage(message)) {
        if (message.pv === "connections:open") handedOpen.set(worker.id, message.open)
        else if (message.pv === "metrics:gather") gather(worker, message.id)
        else if (message.pv === "metrics:text") pending.get(message.id)?.({ worker: message.worker, text: message.text })
      }
    })
  }
  const unready = (worker: Worker) => {
    const at = ready.indexOf(worker)
    if (at !== -1) ready.splice(at, 1)
  }

  cluster.on("exit", (worker, code, signal) => {
    const index = indexOf.get(worker.id) ?? 0
    indexOf.delete(worker.id)
    unready(worker)
    if (stopping) {
      if (indexOf.size === 0) process.exit(exitCode)
      return
    }
    // A worker that dies before it was ever ready failed to start (bad configuration, database gone):
    // restarting it would loop forever, so stop everything and let the supervisor see the failure.
    if (!everReady.has(worker.id)) {
      console.error(`worker ${index} failed to start (${signal ?? code}); stopping`)
      exitCode = 1
      stop()
      return
    }
    everReady.delete(worker.id)
    console.error(`worker ${index} exited (${signal ?? code}); starting a new one`)
    fork(index)
  })
  // Each worker drains itself (http/FrontDoor.ts); one that outlives its grace is killed. The margin
  // covers the closing steps after the grace: interrupting a statement in @effect/sql-pg waits for its
  // cancel request and the connection to drain (up to ~5 s), then the log's last round and the flushes.
  const stop = () => {
    if (stopping) return
    stopping = true
    setTimeout(() => {
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGKILL")
    }, settings.shutdownGraceMs + 12_000).unref()
    // Stop accepting first, then hand the connections held meanwhile to the workers (none ready: they
    // are closed, nothing was sent on them yet that anyone answered): the drain message follows them.
    closeListener(Math.min(ListenerCloseMaxMs, settings.shutdownGraceMs), () => {
      for (const socket of waiting.splice(0)) dispatch(socket)
      const workersLeft = Object.values(cluster.workers ?? {})
      if (workersLeft.length === 0) process.exit(exitCode)
      for (const worker of workersLeft) {
        if (worker === undefined) continue
        // A ready worker drains on the message, which follows every connection sent to it; one still
        // starting has no listener for it yet, so it gets the signal.
        if (ready.includes(worker) && worker.isConnected()) worker.send(DrainMessage)
        else worker.process.kill("SIGTERM")
      }
      ready.length = 0
    })
  }
  /**
   * Closing a listening socket resets the connections the system completed and nobody accepted yet, so
   * the primary keeps accepting until nobody has a reason to connect. A client answered at once would
   * come straight back on a new connection, so the connections accepted meanwhile are held (in
   * `waiting`, unread) rather than handed over: only the requests already with the workers are answered,
   * and their clients' next connections are held too. Once every connection handed over is closed (the
   * workers count them, platform/Cluster.ts) and nothing was accepted for ListenerQuietMs, the listener
   * closes; after `boundMs` without that, too; after twice that anyway. It closes only on a short turn of
   * the event loop that accepted nothing (`closingTurn`): the queue was empty when it looked, a moment ago.
   */
  const closeListener = (boundMs: number, then: () => void) => {
    if (!listener.listening) return then()
    holding = true
    const until = performance.now() + boundMs
    let lastAccept = performance.now()
    let lastAsked = 0
    let lastLook = performance.now()
    const ask: ConnectionsAsk = { pv: "connections:ask" }
    const look = () => {
      const now = performance.now()
      const turnMs = now - lastLook
      lastLook = now
      if (acceptedThisTurn > 0) lastAccept = now
      if (now - lastAsked >= ConnectionsAskMs) {
        lastAsked = now
        for (const worker of ready) if (worker.isConnected()) worker.send(ask)
      }
      const answered = ready.every((worker) => handedOpen.get(worker.id) === 0)
      const quiet = answered && now - lastAccept >= ListenerQuietMs
      if ((closingTurn(acceptedThisTurn, turnMs) && (quiet || now > until)) || now > until + boundMs || !listener.listening) {
        listener.close()
        holding = false
        return then()
      }
      acceptedThisTurn = 0
      setImmediate(look)
    }
    // The first full turn after this one.
    setImmediate(() => {
      acceptedThisTurn = 0
      lastLook = performance.now()
      setImmediate(look)
    })
  }
  process.on("SIGTERM", stop)
  process.on("SIGINT", stop)

  const start = () => {
    for (let i = 0; i < workers; i++) fork(i)
  }
  // The port opens once a worker can serve; with PORT=0 it is opened first, to tell the workers the port
  // the system picked (connections accepted before a worker is ready wait for it).
  if (port === 0) listen(start)
  else start()
}

/** How long a stopping primary must have accepted nothing, with no handed connection open, to close its listener (as http/FrontDoor.ts). */
const ListenerQuietMs = 60
/**
 * How long it waits for that (within the grace); then only for a turn that accepted nothing (twice as long
 * at most). Longer than a single process's 250 ms: under load, two workers took about that long to answer
 * what they had, and closing on the bound while they still did reset a few of their clients' next connects.
 * Not much longer: an idle kept-alive connection stays open, and the workers' drain (`/readyz` 503) waits.
 */
const ListenerCloseMaxMs = 500
/** How often it asks the workers how many handed connections are still open. */
const ConnectionsAskMs = 10

/**
 * The launch's settings from the process environment, through the same Config definitions AppConfig reads
 * (platform/Config.ts), so a bad value stops the start naming its variable instead of becoming a default.
 */
export const launchSettingsFromEnv = (): LaunchSettings => {
  const read = Effect.runSyncExit(launchSettings.parse(ConfigProvider.fromEnv()))
  if (Exit.isSuccess(read)) return read.value
  const error = Cause.squash(read.cause)
  console.error(`bad configuration: ${error instanceof Error ? error.message : String(error)}`)
  return process.exit(1)
}
