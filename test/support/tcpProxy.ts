import { connect, createServer, type Server, type Socket } from "node:net"

/**
 * A TCP proxy in front of a real server (PostgreSQL in the fault suite) whose network can be broken on
 * purpose. Modes:
 *
 * - `forward`: bytes flow both ways.
 * - `refuse`: the listening socket is CLOSED, so a new connect gets ECONNREFUSED (a refused connect needs
 *   that: merely destroying accepted sockets would look like a reset, not a refusal), and every existing
 *   connection is destroyed in both directions (the client sees a reset/EOF), as when the database process
 *   dies. Switching back to `forward` listens again on the same port.
 * - `blackhole`: a network partition. The listener stays open and accepts; existing and new connections stay
 *   open, but nothing is delivered in either direction: bytes are held back (as TCP would keep
 *   retransmitting them), so a query gets no answer and a connect attempt gets no server greeting. Switching
 *   back to `forward` delivers what was held, in order, and new connections get their upstream then, like a
 *   partition that heals before TCP gives up. A side that closes its socket meanwhile closes the pair.
 */

export type ProxyMode = "forward" | "refuse" | "blackhole"

interface Pair {
  readonly client: Socket
  upstream: Socket | undefined
  /** Bytes from the client not yet delivered upstream / from upstream not yet delivered to the client. */
  readonly toUpstream: Array<Buffer>
  readonly toClient: Array<Buffer>
}

export interface TcpProxy {
  readonly port: number
  readonly mode: ProxyMode
  /** Connections the proxy accepted so far. */
  readonly accepted: number
  /** Connections open now. */
  readonly open: number
  setMode(mode: ProxyMode): Promise<void>
  close(): Promise<void>
}

/**
 * `latencyMs` delays every byte from the server to the client by that much, in order (a database on a slow
 * link: its answers and notifications arrive late). Meant for `forward` mode only.
 */
export const startTcpProxy = async (
  target: { readonly host: string; readonly port: number },
  options: { readonly latencyMs?: number } = {}
): Promise<TcpProxy> => {
  const latencyMs = options.latencyMs ?? 0
  let mode: ProxyMode = "forward"
  let accepted = 0
  const pairs = new Set<Pair>()
  let server: Server | undefined

  const destroy = (pair: Pair) => {
    pairs.delete(pair)
    pair.client.destroy()
    pair.upstream?.destroy()
  }

  const flush = (pair: Pair) => {
    if (pair.upstream && pair.upstream.readyState === "open") {
      for (const chunk of pair.toUpstream.splice(0)) pair.upstream.write(chunk)
    }
    if (!pair.client.destroyed) for (const chunk of pair.toClient.splice(0)) pair.client.write(chunk)
  }

  const openUpstream = (pair: Pair) => {
    const upstream = connect({ host: target.host, port: target.port })
    pair.upstream = upstream
    upstream.setNoDelay(true)
    upstream.on("connect", () => {
      if (mode === "forward") flush(pair)
    })
    upstream.on("data", (chunk: Buffer) => {
      // Timers of one duration fire in the order they were set, so the delayed bytes keep their order.
      if (latencyMs > 0) setTimeout(() => pair.client.destroyed || pair.client.write(chunk), latencyMs)
      else if (mode === "forward" && pair.toClient.length === 0) pair.client.write(chunk)
      else pair.toClient.push(chunk)
    })
    upstream.on("error", () => destroy(pair))
    upstream.on("close", () => destroy(pair))
  }

  const onConnection = (client: Socket) => {
    accepted++
    if (mode === "refuse") {
      client.destroy()
      return
    }
    client.setNoDelay(true)
    const pair: Pair = { client, upstream: undefined, toUpstream: [], toClient: [] }
    pairs.add(pair)
    client.on("data", (chunk: Buffer) => {
      const upstream = pair.upstream
      if (mode === "forward" && upstream && upstream.readyState === "open" && pair.toUpstream.length === 0) upstream.write(chunk)
      else pair.toUpstream.push(chunk)
    })
    client.on("error", () => destroy(pair))
    client.on("close", () => destroy(pair))
    if (mode === "forward") openUpstream(pair)
  }

  const listen = (port: number) =>
    new Promise<Server>((resolve, reject) => {
      const s = createServer({ noDelay: true }, onConnection)
      s.once("error", reject)
      s.listen({ port, host: "127.0.0.1", exclusive: true }, () => {
        s.off("error", reject)
        resolve(s)
      })
    })

  const stopListening = () =>
    new Promise<void>((resolve) => {
      const s = server
      server = undefined
      if (!s) return resolve()
      s.close(() => resolve())
    })

  server = await listen(0)
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0

  return {
    port,
    get mode() {
      return mode
    },
    get accepted() {
      return accepted
    },
    get open() {
      return pairs.size
    },
    async setMode(next: ProxyMode) {
      if (next === mode) return
      const previous = mode
      mode = next
      if (next === "refuse") {
        // Close the listener first, then every connection: a connect from now on is refused.
        const closing = stopListening()
        for (const pair of [...pairs]) destroy(pair)
        await closing
        return
      }
      if (previous === "refuse") server = await listen(port)
      if (next === "forward") {
        for (const pair of [...pairs]) {
          if (pair.upstream === undefined) openUpstream(pair)
          else flush(pair)
        }
      }
    },
    async close() {
      mode = "refuse"
      const closing = stopListening()
      for (const pair of [...pairs]) destroy(pair)
      await closing
    }
  }
}
