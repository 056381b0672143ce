import * as Http from "node:http"
import * as Net from "node:net"
import type { Duplex } from "node:stream"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Context, Deferred, Effect, Exit, Layer, Option, Result, Scope } from "effect"
import { HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { NetAddress } from "effect/net"
import {
  BadRequest,
  ExpectationFailed,
  HeaderFieldsTooLarge,
  Overloaded,
  type ProblemError,
  RequestTimeout,
  renderProblem,
  Unavailable
} from "../domain/Problem.js"
import { announcesBody, MaxBodyBytes } from "../api/Problems.js"
import { makeRequestRecord, problemInstance, RequestId, RequestIdHeader, requestIdFrom, type RequestRecord } from "../observability/RequestRecord.js"
import { Telemetry } from "../observability/Telemetry.js"
import { closingTurn, ConnectionMessage, DrainMessage, isClusterWorker, ReadyMessage, sendToPrimary } from "../platform/Cluster.js"
import { AppConfig, type AppConfigShape } from "../platform/Config.js"
import { fixedLimit, gradientLimit } from "./ConcurrencyLimit.js"
import { withLiveAddress, withoutBuildTimeServices } from "../domain/EffectInternals.js"
import { InFlight, type InFlightEntry } from "./InFlight.js"

/**
 * The context every request starts from. `makeHandler` hands each request the context the server was
 * built in (every service of the app: 33 entries), and each HttpApi group provides its own context
 * on top: a merge, which copies the request's whole context (twice: flattened, then merged) on every
 * request. Handlers and middlewares take the services they use (the app's own "pv/…", the SQL client,
 * the file system, the terminal) when their layers are built, never per request, so the requests start
 * without them: 33 entries become 6 (a trace of the handler's context), Effect's references (the clock,
 * tracing, the memo map), the scope and the HTTP platform's services. A request that did read a removed
 * service would fail loudly ("Service not found"), never quietly.
 */
const requestContext = withoutBuildTimeServices

/**
 * The service's own `node:http` server, in front of the Effect app. It owns only what Effect's server
 * cannot do, what must hold before any Effect code runs and even when none can: the port opens only once
 * the handler is installed; client time-outs, header size and connection count are bounded; at most the
 * concurrency limit's requests are worked on at once (503 `overloaded` beyond, without reading their
 * bodies); the HTTP parser's own refusals are problem+json; and SIGTERM drains instead of dropping
 * connections. Its own answers carry a request id of their own and are logged and counted like any other;
 * everything else per request (request id, origins, /metrics, the /log alias, problems) is the router's
 * (http/Edge.ts, app/HttpLive.ts).
 */
export interface FrontDoorShape {
  /** True from the moment a drain starts: `/readyz` answers 503 from then on. */
  readonly draining: () => boolean
  /** Requests admitted and not yet answered. */
  readonly inFlight: () => number
  /** Completes once the port is open with the handler installed. */
  readonly listening: Effect.Effect<NetAddress.SocketAddress>
  /** Completes when a drain starts: long-lived responses (event streams) end on it. */
  readonly stopping: Effect.Effect<void>
  /**
   * The request waits on purpose (POST /reliance-receipts with Prefer: wait): it keeps its in-flight slot, but
   * its time is not a sample of this process's latency, so the adaptive limit does not shrink for it.
   */
  readonly waitsOnPurpose: (request: HttpServerRequest.HttpServerRequest) => void
  /**
   * Serves requests of `method` on `path` (the query is the handler's) with a plain `node:http` handler,
   * after admission and the drain, with a request id and its metrics and log line, instead of the Effect
   * app (so without its edge: no browser-origin rules); the record's route is `path`. Registered before
   * the port opens.
   * Only `pv witness serve`'s POST /add-checkpoint uses it (docs/ARCHITECTURE.md, "The witness").
   */
  readonly serveDirect: (method: string, path: string, handler: (req: Http.IncomingMessage, res: Http.ServerResponse) => void) => void
  /**
   * A handler tried first on every admitted GET (after admission and the drain), before the Effect app: it either
   * answers, calling `answering(req, res, route)` before it writes (metrics and a log line under that route, as
   * serveDirect's) and sending the request id it returns as `x-request-id` in its head, and returns true, or writes
   * nothing and returns false, and the app answers.
   * Only the log's public reads use it (log/FastReads.ts), to answer from memory. Registered before the port opens.
   */
  readonly serveFirst: (handler: FirstHandler) => void
}

/** See `FrontDoorShape.serveFirst`. */
export type FirstHandler = (
  req: Http.IncomingMessage,
  res: Http.ServerResponse,
  answering: (req: Http.IncomingMessage, res: Http.ServerResponse, route: string) => string
) => boolean

/**
 * The live event stream: a response that lasts as long as its client wants it, so it is not "work in
 * flight". It counts against the connection limit (PV_MAX_CONNECTIONS) and its own per-key cap, never
 * against PV_MAX_IN_FLIGHT (open streams must not starve ordinary requests), and a drain does not wait
 * for it: it ends when the drain starts (events/LiveStream.ts).
 */
export const EventStreamPath = "/api/v1/events/stream"

/**
 * A scope for what the current response holds (a live stream's slot): it closes as soon as the response is
 * over, sent or its client gone (the Node response's `close`), or with the request's scope, whichever comes
 * first. The request's own scope waits for the request's fiber, which an interrupted database read can hold
 * (the embedded database never answers a cancel request: the driver gives up after 5 s).
 */
export const responseScope: Effect.Effect<Scope.Closeable, never, Scope.Scope | HttpServerRequest.HttpServerRequest> = Effect.gen(
  function*() {
    const scope = yield* Scope.fork(yield* Scope.Scope)
    const res = NodeHttpServerRequest.toServerResponse(yield* HttpServerRequest.HttpServerRequest) as Http.ServerResponse
    const over = () => void Effect.runFork(Scope.close(scope, Exit.void))
    if (res.destroyed || res.writableFinished) over()
    else res.once("close", over)
    return scope
  }
)

export class FrontDoor extends Context.Service<FrontDoor, FrontDoorShape>()("pv/FrontDoor") {}

/** The Node response of a request the service's own server received. */
const nodeResponseOf = (request: HttpServerRequest.HttpServerRequest): Http.ServerResponse | undefined =>
  request.source instanceof Http.IncomingMessage ? NodeHttpServerRequest.toServerResponse(request) as Http.ServerResponse : undefined

/** A problem answered here; its `instance` names the request id (set on `res` by `answeredHere`). */
const sendProblem = (res: Http.ServerResponse, error: ProblemError, headers: Record<string, string> = {}) => {
  const id = res.getHeader(RequestIdHeader)
  const problem = renderProblem(error, typeof id === "string" ? problemInstance(id) : undefined)
  res.writeHead(problem.status, { ...problem.headers, "content-length": Buffer.byteLength(problem.body), ...headers })
  res.end(problem.body)
}

/** The `detail` of every 503 `overloaded` the front door answers. */
export const OverloadedDetail = "The service is at capacity; retry shortly."

/**
 * The body of the 503 `overloaded` refusal for request `id`: the very text `sendProblem` writes for
 * `new Overloaded({ detail: OverloadedDetail })`, encoded once. Only `instance` (the request id) differs
 * between refusals, so each is the same prefix and suffix around the percent-encoded id (which never needs
 * JSON escaping): under overload a refusal costs no error object (with its stack trace), no document and no
 * JSON.stringify, and the CPU goes to the requests admitted.
 */
const overloaded = renderProblem(new Overloaded({ detail: OverloadedDetail }), problemInstance("PVREQUESTID"))

export const overloadedBody: (id: string) => string = (() => {
  const mark = "PVREQUESTID"
  const text = overloaded.body
  const at = text.indexOf(mark)
  const head = text.slice(0, at)
  const tail = text.slice(at + mark.length)
  return (id) => head + encodeURIComponent(id) + tail
})()

/**
 * A whole response written straight onto a socket the parser gave up on (no ServerResponse exists, so
 * no request id was read either: it carries a generated one). Returns the status written.
 */
const writeRawProblem = (socket: Duplex, error: ProblemError, requestId: string) => {
  const { status, headers, body } = renderProblem(error, problemInstance(requestId))
  socket.end(
    `HTTP/1.1 ${status} ${Http.STATUS_CODES[status] ?? error.title}\r\n` +
      Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("") +
      `content-length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\n` +
      "Connection: close\r\n\r\n" + body
  )
  return status
}

const parserRefusal = (code: string | undefined): ProblemError => {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return new HeaderFieldsTooLarge({ detail: "The request's header block is too large." })
    case "ERR_HTTP_REQUEST_TIMEOUT":
    case "HPE_HEADERS_TIMEOUT":
      return new RequestTimeout({ detail: "The request was not received in time." })
    default:
      return new BadRequest({ detail: "The request is not a well-formed HTTP/1.1 request." })
  }
}

/**
 * A request whose body, announced by Content-Length and at most MaxBodyBytes, may already have come with its
 * headers (no `Expect: 100-continue`, whose body waits for the server's go-ahead): it starts once parsed.
 */
const startsOnceParsed = (req: Http.IncomingMessage): boolean => {
  const length = req.headers["content-length"]
  if (length === undefined || req.headers["transfer-encoding"] !== undefined || req.headers.expect !== undefined) return false
  const bytes = Number(length)
  return bytes > 0 && bytes <= MaxBodyBytes
}

const pathOf = (url: string | undefined) => {
  const raw = url ?? "/"
  const q = raw.indexOf("?")
  return q === -1 ? raw : raw.slice(0, q)
}

/** After the last request in flight, how long kept-alive sockets may still bring a (refused) request. */
const DrainLingerMs = 300
/** How long a draining server must have accepted nothing, with nothing in flight, to close its listener. */
const ListenerQuietMs = 60
/** How long a draining server waits for that; then only for a turn that accepted nothing (twice as long at most). */
const ListenerCloseMaxMs = 250

type Handler = (req: Http.IncomingMessage, res: Http.ServerResponse) => void

const nodeServer = (config: AppConfigShape) =>
  Http.createServer({
    headersTimeout: config.headersTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    maxHeaderSize: config.maxHeaderBytes,
    // Node would refuse a request without Host with a bare 400; the front door answers it as a problem.
    requireHostHeader: false,
    // Node checks time-outs on this interval; keep it well under the smallest time-out.
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(config.headersTimeoutMs / 4)))
  })

/**
 * `HttpServer.HttpServer` for the HttpApi, served by the front door. The port opens when the app's
 * handler is installed (HttpRouter.serve, the last layer built), so a connection accepted earlier
 * cannot exist; the scope's end drains: `/readyz` 503, no new connections, requests in flight finish
 * (up to the grace period) with `Connection: close`, late requests on kept-alive sockets get 503.
 */
const FrontDoorServer: Layer.Layer<HttpServer.HttpServer | FrontDoor, never, AppConfig | Telemetry> = Layer.effectContext(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const server = nodeServer(config)
    // What the address is before the port is open (the host may be a name; PORT=0 picks the port later).
    const configured: NetAddress.SocketAddress = NetAddress.inetAddressFromHostString(config.host, config.port).pipe(
      Result.getOrElse(() => NetAddress.inetAddressFromIpStringUnsafe("0.0.0.0", config.port))
    )
    server.maxConnections = config.maxConnections
    const listening = yield* Deferred.make<NetAddress.SocketAddress>()
    const stopping = yield* Deferred.make<void>()
    /** The admitted requests not yet answered, with when each arrived (`performance.now()`): see InFlight.ts. */
    const open = new InFlight<Http.ServerResponse>()
    let handler: Handler | undefined
    /** serveDirect's handlers, by `<method> <path>`. */
    const direct = new Map<string, Handler>()
    let first: FirstHandler | undefined
    let draining = false
    let onIdle: (() => void) | undefined
    /** While a drain waits to close the listener: the connections accepted meanwhile, and their held answers. */
    let closing: { readonly accepted: WeakSet<Duplex>; readonly held: Array<() => void> } | undefined
    const telemetry = yield* Telemetry
    // Pinned by the operator, or adaptive: it learns from every admitted request's time (admittedDone).
    const limit = Option.match(config.maxInFlight, { onNone: () => gradientLimit(), onSome: fixedLimit })
    telemetry.admission.limit = limit.current
    /** Admitted responses whose time is not a latency sample (waitsOnPurpose). */
    const waiting = new WeakSet<Http.ServerResponse>()

    /** Each admitted response's entry in the front door's InFlight list (kept after its close: see `admittedAt`). */
    const admitted = new WeakMap<Http.ServerResponse, InFlightEntry<Http.ServerResponse>>()

    /**
     * When the front door admitted the request this response answers (`performance.now()`): its arrival, which the
     * edge measures the request's duration from (http/Edge.ts), also after the response closed. Undefined for a
     * response the front door did not admit through its limit (an event stream).
     */
    const admittedAt = (res: Http.ServerResponse): number | undefined => admitted.get(res)?.startedAt

    /** The record of a request the app runs (its id, the client's when acceptable), timed from its arrival here. */
    const arrivalRecord = (requestIdHeader: string | ReadonlyArray<string> | undefined, res: Http.ServerResponse): RequestRecord =>
      makeRequestRecord(requestIdFrom(requestIdHeader), admittedAt(res) ?? performance.now())

    /** The `close` listener of every admitted response: the concurrency limit learns its time; the drain's count. */
    function admittedDone(this: Http.ServerResponse) {
      // The entry stays in `admitted` (unlinked, it holds nothing): admittedAt still answers after the close.
      const entry = admitted.get(this)
      if (entry === undefined) return
      const inFlight = open.size
      if (!open.remove(entry)) return
      if (!waiting.has(this)) limit.sample(performance.now() - entry.startedAt, inFlight)
      if (open.size === 0) onIdle?.()
    }
    /**
     * A request answered here, not by the app (a refusal, a direct handler, the first handler): its record (the
     * client's id when acceptable, else a generated one), whose metrics and log line are written when it ends, as
     * the edge does for the app's answers (http/Edge.ts). Its id is returned; the first handler sends it in its own
     * head (one `writeHead`, no `setHeader`).
     */
    const answeredFirst = (req: Http.IncomingMessage, res: Http.ServerResponse, route: string | null): string => {
      const record = makeRequestRecord(requestIdFrom(req.headers[RequestIdHeader]), performance.now())
      record.route = route
      res.on("close", () => telemetry.requestEnded(req, res, record))
      return record.id
    }
    /** `answeredFirst`, with the id set on the response. */
    const answeredHere = (req: Http.IncomingMessage, res: Http.ServerResponse, route: string | null = null): string => {
      const id = answeredFirst(req, res, route)
      res.setHeader(RequestIdHeader, id)
      return id
    }

    server.on("request", (req: Http.IncomingMessage, res: Http.ServerResponse) => {
      if (draining || handler === undefined) {
        answeredHere(req, res)
        const refuse = () =>
          sendProblem(res, new Unavailable({ detail: "The service is shutting down; retry on another connection." }), {
            "retry-after": "1",
            connection: "close"
          })
        // A client answered now would come straight back on a new connection (closeListener).
        if (closing?.accepted.has(req.socket) && pathOf(req.url) !== "/readyz") return void closing.held.push(refuse)
        return refuse()
      }
      if (req.headers.host === undefined && req.httpVersionMinor >= 1) {
        answeredHere(req, res)
        return sendProblem(res, new BadRequest({ detail: "HTTP/1.1 requests must carry a Host header." }), { connection: "close" })
      }
      const path = pathOf(req.url)
      const streaming = path === EventStreamPath && req.method === "GET"
      if (!streaming && open.size >= limit.current()) {
        // A body is never read: a request that has one closes its connection after this answer. One without a
        // body keeps it, so a refusal under overload costs no new connection (and no TLS handshake behind a proxy).
        const hasBody = announcesBody(req.headers)
        const body = overloadedBody(answeredHere(req, res))
        res.writeHead(
          503,
          hasBody
            ? { ...overloaded.headers, "content-length": Buffer.byteLength(body), connection: "close" }
            : { ...overloaded.headers, "content-length": Buffer.byteLength(body) }
        )
        return void res.end(body)
      }
      // Removed by admittedDone, when the response closes.
      if (!streaming) {
        admitted.set(res, open.add(res, performance.now()))
        res.on("close", admittedDone)
      }
      const directHandler = direct.size === 0 ? undefined : direct.get(`${req.method} ${path}`)
      if (directHandler !== undefined) {
        answeredHere(req, res, path)
        return directHandler(req, res)
      }
      if (first !== undefined && req.method === "GET" && first(req, res, answeredFirst)) return
      // A small body sent with its headers is parsed right after them, from the same read: the app starts once
      // that is done (an immediate runs after it), so it takes the body at once (http/RequestGuard.ts,
      // readBoundedMessage) instead of suspending to wait for it. A body still on its way is read as it comes.
      if (startsOnceParsed(req)) {
        const app = handler
        return void setImmediate(() => {
          // The client left before the app saw its request (its reset reaches the socket before the response
          // closes): nothing to do but count and log it (499).
          if (res.destroyed || req.socket.destroyed) return telemetry.requestEnded(req, res, arrivalRecord(req.headers[RequestIdHeader], res))
          app(req, res)
        })
      }
      handler(req, res)
    })

    // The parser's refusals (malformed request line or headers, oversized headers, time-outs).
    server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
      if (!socket.writable || error.code === "ECONNRESET") return socket.destroy()
      const id = requestIdFrom(undefined)
      telemetry.parserRefusal(id, writeRawProblem(socket, parserRefusal(error.code), id))
    })
    server.on("checkExpectation", (req: Http.IncomingMessage, res: Http.ServerResponse) => {
      answeredHere(req, res)
      sendProblem(res, new ExpectationFailed({ detail: "Only `Expect: 100-continue` is supported." }), { connection: "close" })
    })

    const address = (): NetAddress.SocketAddress => {
      const bound = server.address()
      if (bound === null) return configured
      if (typeof bound === "string") return NetAddress.unixPathAddress(bound)
      return NetAddress.inetAddressFromIpStringUnsafe(bound.address === "::" ? "0.0.0.0" : bound.address, bound.port)
    }

    /**
     * A cluster worker does not listen: the primary accepts and hands it connections (app/Launch.ts), which
     * it serves like its own, up to PV_MAX_CONNECTIONS (as `server.maxConnections` would), while draining
     * too. Its drain starts on the primary's message, which comes after every connection sent to it.
     */
    let handed = 0
    const onPrimaryMessage = (message: unknown, socket: unknown) => {
      if (message === DrainMessage) {
        process.kill(process.pid, "SIGTERM")
        return
      }
      if (message !== ConnectionMessage || !(socket instanceof Net.Socket)) return
      if (handed >= config.maxConnections) {
        socket.destroy()
        return
      }
      handed++
      socket.once("close", () => handed--)
      server.emit("connection", socket)
    }
    const joinCluster = Effect.sync(() => {
      process.on("message", onPrimaryMessage)
      // What listening would do: Node starts checking the connections' time-outs on "listening".
      server.emit("listening")
      sendToPrimary(ReadyMessage)
    })
    /** Registered before the drain, so it runs after it: connections handed over meanwhile are still answered. */
    const leaveCluster = Effect.sync(() => process.off("message", onPrimaryMessage))

    const listen = isClusterWorker() ? joinCluster : Effect.callback<void>((resume) => {
      const onError = (cause: Error) => resume(Effect.die(cause))
      server.once("error", onError)
      server.listen({ port: config.port, host: config.host }, () => {
        server.off("error", onError)
        resume(Effect.void)
      })
    })

    /**
     * Closing a listening socket resets the connections the system completed and nobody accepted yet
     * (under load, a busy process has some in its backlog), so a draining server keeps accepting until
     * nobody has a reason to connect: nothing accepted and nothing in flight for ListenerQuietMs, and
     * nothing accepted on the short turn of the event loop that closes it (the queue was empty when it
     * looked, a moment ago: platform/Cluster.ts, `closingTurn`).
     * A client answered at once would come straight back on a new connection, so requests on the
     * connections accepted meanwhile get their 503 (with `Connection: close`) only once the listener is
     * closed (`/readyz` at once). After ListenerCloseMaxMs (within the grace; a request still in flight) it
     * closes on the next short turn that accepted nothing (as a cluster primary does, app/Launch.ts: a worker
     * has no listener), and after twice that anyway.
     */
    const stopListening = () => {
      if (server.listening) Net.Server.prototype.close.call(server)
      const held = closing?.held ?? []
      closing = undefined
      for (const refuse of held) refuse()
    }
    const closeListener = (boundMs: number, then: () => void) => {
      if (!server.listening) return then()
      const state = { accepted: new WeakSet<Duplex>(), held: new Array<() => void>() }
      closing = state
      let accepted = 0
      const count = (socket: Duplex) => {
        accepted++
        state.accepted.add(socket)
      }
      server.on("connection", count)
      const until = performance.now() + boundMs
      let lastActive = performance.now()
      let lastLook = performance.now()
      let inFlight = open.size
      const look = () => {
        const now = performance.now()
        const turnMs = now - lastLook
        lastLook = now
        if (accepted > 0 || open.size !== inFlight) lastActive = now
        inFlight = open.size
        const quiet = inFlight === 0 && now - lastActive >= ListenerQuietMs
        if ((closingTurn(accepted, turnMs) && (quiet || now > until)) || now > until + boundMs || !server.listening) {
          server.off("connection", count)
          stopListening()
          return then()
        }
        accepted = 0
        setImmediate(look)
      }
      // The first full turn after this one.
      setImmediate(() => {
        accepted = 0
        lastLook = performance.now()
        setImmediate(look)
      })
    }

    /**
     * Stop accepting (once the backlog is empty, closeListener), but keep kept-alive sockets open: a
     * request already on its way over one gets a 503 with `Connection: close` instead of a reset (Node's
     * own `server.close()` would drop idle sockets at once, racing with requests in flight on the wire).
     * Every answer from here on closes its connection; once the listener is closed and the work in
     * flight is done, stragglers get a short linger, then everything still open is closed.
     */
    const drain = Effect.andThen(Deferred.succeed(stopping, undefined), Effect.callback<void>((resume) => {
      draining = true
      const started = Date.now()
      open.forEach((res) => {
        if (!res.headersSent) res.setHeader("connection", "close")
      })
      let finished = false
      const finish = () => {
        if (finished) return
        finished = true
        clearTimeout(graceTimer)
        onIdle = undefined
        stopListening()
        const linger = Math.max(0, Math.min(DrainLingerMs, config.shutdownGraceMs - (Date.now() - started)))
        setTimeout(() => {
          server.closeAllConnections()
          resume(Effect.void)
        }, linger)
      }
      const graceTimer = setTimeout(finish, config.shutdownGraceMs)
      closeListener(Math.min(ListenerCloseMaxMs, config.shutdownGraceMs), () => {
        if (finished) return
        if (open.size === 0) finish()
        else onIdle = finish
      })
    }))

    /**
     * Every request the app runs gets its record (request id, arrival, what the router and the API-key middleware
     * note, the headers every answer carries) in its Effect context, as `RequestId`: the one per-request state,
     * set once here. When the response is over (sent or its client gone) its metrics and log line are written.
     * An answer given before a request body was received in full closes the connection (nobody reads the rest).
     */
    const withRequestRecord = <E, R>(
      app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> =>
      Effect.withFiber((fiber) => {
        const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
        const req = NodeHttpServerRequest.toIncomingMessage(request) as Http.IncomingMessage
        const res = NodeHttpServerRequest.toServerResponse(request) as Http.ServerResponse
        const record = arrivalRecord(req.headers[RequestIdHeader], res)
        res.on("close", () => telemetry.requestEnded(req, res, record))
        const answered = Effect.provideService(app, RequestId, record)
        if (!announcesBody(req.headers)) return answered
        return Effect.map(answered, (response) => req.complete ? response : HttpServerResponse.setHeader(response, "connection", "close"))
      })

    const httpServer = HttpServer.make({
      address: configured,
      serve: (app, middleware) =>
        Effect.gen(function*() {
          // Requests run in a child scope forked BEFORE the drain is registered: finalizers run in reverse,
          // so on stop the drain runs first and requests in flight finish; only stragglers past the grace
          // are interrupted, when the child scope closes after it.
          const requests = yield* Scope.fork(yield* Scope.Scope, "parallel")
          handler = yield* NodeHttpServer.makeHandler(withRequestRecord(app), middleware === undefined ? { scope: requests } : { scope: requests, middleware }).pipe(
            (make) => Effect.updateContext(make, (context: Context.Context<Effect.Services<typeof make>>) => requestContext(context))
          )
          if (isClusterWorker()) yield* Effect.addFinalizer(() => leaveCluster)
          yield* Effect.addFinalizer(() => drain)
          yield* listen
          yield* Deferred.succeed(listening, address())
        })
    })
    // The real address (PORT=0 picks one) exists only once listening.
    withLiveAddress(httpServer, address)
    yield* Effect.addFinalizer(() => Effect.sync(() => server.listening && server.close()))

    return Context.make(HttpServer.HttpServer, httpServer).pipe(
      Context.add(FrontDoor, {
        draining: () => draining,
        inFlight: () => open.size,
        listening: Effect.withSpan(Deferred.await(listening), "FrontDoor.listening"),
        stopping: Effect.withSpan(Deferred.await(stopping), "FrontDoor.stopping"),
        waitsOnPurpose: (request) => {
          const res = nodeResponseOf(request)
          if (res !== undefined) waiting.add(res)
        },
        serveDirect: (method, path, serve) => void direct.set(`${method} ${path}`, serve),
        serveFirst: (handler) => void (first = handler)
      })
    )
  })
)

/**
 * The front door with Telemetry (also the edge's and the /metrics route's: one instance per server) and the
 * platform services HttpApi expects next to a server (file system, ETags, …).
 */
export const FrontDoorLive = Layer.merge(FrontDoorServer.pipe(Layer.provideMerge(Telemetry.layer)), NodeHttpServer.layerHttpServices)
