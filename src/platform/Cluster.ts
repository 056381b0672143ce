import cluster from "node:cluster"
import * as Net from "node:net"

/**
 * The messages between a cluster's primary and its workers (PV_WORKERS > 1, src/app/Launch.ts), over
 * node:cluster's IPC channel. The primary owns the listening socket and hands each accepted connection
 * to a worker; a worker says when it can serve, and gathers every worker's metrics through the primary.
 */

/** Primary → worker, with a socket: a connection to serve. */
export const ConnectionMessage = "pv:connection"
/** Primary → worker: the primary has stopped accepting; drain and exit (as on SIGTERM). */
export const DrainMessage = "pv:drain"
/** Worker → primary: the handler is installed, connections may come. */
export const ReadyMessage = "pv:ready"

/** Worker → primary: a scrape of /metrics wants every worker's exposition. */
export interface MetricsGather {
  readonly pv: "metrics:gather"
  readonly id: number
}
/** Primary → every worker: send your exposition for gather `id`. */
export interface MetricsCollect {
  readonly pv: "metrics:collect"
  readonly id: number
}
/** Worker → primary: this worker's exposition (Prometheus text) for gather `id`. */
export interface MetricsText {
  readonly pv: "metrics:text"
  readonly id: number
  readonly worker: string
  readonly text: string
}
/** Primary → the gathering worker: the expositions that came in time, of `expected` workers. */
export interface MetricsGathered {
  readonly pv: "metrics:gathered"
  readonly id: number
  readonly expected: number
  readonly texts: ReadonlyArray<{ readonly worker: string; readonly text: string }>
}

/** Primary → worker, while a stopping primary waits to close its listener: how many connections handed to you are open? */
export interface ConnectionsAsk {
  readonly pv: "connections:ask"
}
/** Worker → primary: the connections handed to this worker that are still open. */
export interface ConnectionsOpen {
  readonly pv: "connections:open"
  readonly open: number
}

export type ClusterMessage = MetricsGather | MetricsCollect | MetricsText | MetricsGathered | ConnectionsAsk | ConnectionsOpen

export const isClusterMessage = (message: unknown): message is ClusterMessage =>
  typeof message === "object" && message !== null && typeof (message as { pv?: unknown }).pv === "string"

/** How long the primary waits for the workers' expositions of one scrape. */
export const MetricsGatherMs = 1_000

/** The longest turn `closingTurn` accepts: a turn with nothing to do takes microseconds, a lost time slice milliseconds. */
export const ClosingTurnMaxMs = 1
/**
 * A turn of the event loop on which a listener may close (a cluster primary's, app/Launch.ts, or a single
 * process's, http/FrontDoor.ts): it accepted nothing, and it was short, so the queue of completed
 * connections was empty a moment ago, not just when the turn began. A process that lost the CPU between
 * accepting and closing (to another process, on a busy machine: tens of milliseconds) would otherwise close
 * on the connections completed meanwhile, and reset them.
 */
export const closingTurn = (accepted: number, turnMs: number): boolean => accepted === 0 && turnMs <= ClosingTurnMaxMs

/** True in a worker forked by `launch` (it serves connections the primary hands it). */
export const isClusterWorker = (): boolean => cluster.isWorker && typeof process.send === "function"

/** Sends `message` to the primary; false when the channel is gone (the primary died or disconnected). */
export const sendToPrimary = (message: unknown): boolean => {
  if (typeof process.send !== "function" || !process.connected) return false
  try {
    return process.send(message)
  } catch {
    return false
  }
}

/**
 * A worker counts the connections handed to it that are still open and tells the primary when asked: a
 * stopping primary closes its listener only once they are answered and closed (app/Launch.ts), since
 * their clients come back on a new connection. Counted here, beside whoever serves them (http/FrontDoor.ts).
 */
if (isClusterWorker()) {
  let open = 0
  const onMessage = (message: unknown, socket: unknown) => {
    if (message === ConnectionMessage && socket instanceof Net.Socket) {
      open++
      socket.once("close", () => open--)
    } else if (message === DrainMessage) {
      process.off("message", onMessage)
    } else if (isClusterMessage(message) && message.pv === "connections:ask") {
      const reply: ConnectionsOpen = { pv: "connections:open", open }
      sendToPrimary(reply)
    }
  }
  process.on("message", onMessage)
}
