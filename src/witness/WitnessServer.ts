import type { IncomingMessage, ServerResponse } from "node:http"
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { PgClient } from "@effect/sql-pg"
import { MaxBodyBytes, problemAnswer } from "../api/Problems.js"
import {
  BadRequest,
  Forbidden,
  Internal,
  NotFound,
  PayloadTooLarge,
  type ProblemError,
  renderProblem,
  Unauthorized,
  Unavailable,
  ValidationFailed
} from "../domain/Problem.js"
import { FrontDoor, FrontDoorLive } from "../http/FrontDoor.js"
import { EdgeLive } from "../http/Edge.js"
import { decodesAsUtf8, internalTokenRule, readBoundedMessage } from "../http/RequestGuard.js"
import { countDatabaseError } from "../observability/Metrics.js"
import { problemInstance, RequestIdHeader } from "../observability/RequestRecord.js"
import { MetricsRouteLive, ObserveRoutesLive } from "../http/Routes.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseLive, latestMigrationId } from "../platform/Database.js"
import { databaseFailure } from "../platform/DatabaseErrors.js"
import { Witness, type WitnessAnswer } from "./Witness.js"

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

const problemOf = (answer: WitnessAnswer): ProblemError => {
  switch (answer.status) {
    case 403:
      return new Forbidden({ detail: `The checkpoint is not signed by a key this witness trusts: ${answer.detail}.` })
    case 404:
      return new NotFound({ detail: `Unknown log: ${answer.detail}.` })
    case 422:
      return new ValidationFailed({ detail: `The checkpoint is not consistent with what this witness cosigned: ${answer.detail}.` })
    default:
      return new BadRequest({ detail: `The add-checkpoint request is malformed: ${answer.detail}.` })
  }
}

/**
 * A problem+json answer by the service's one renderer (domain/Problem.ts), `instance` naming the request.
 * Given before the request's body was read in full, it closes the connection (nobody reads the rest).
 */
const sendProblem = (res: ServerResponse, problem: ProblemError) => {
  const id = res.getHeader(RequestIdHeader)
  const rendered = renderProblem(problem, typeof id === "string" ? problemInstance(id) : undefined)
  res.writeHead(rendered.status, {
    ...rendered.headers,
    "content-length": Buffer.byteLength(rendered.body),
    ...(res.req.complete ? {} : { connection: "close" })
  })
  res.end(rendered.body)
}

/**
 * POST /add-checkpoint as a plain `node:http` handler, served by the front door after its checks
 * (`FrontDoor.serveDirect`: admission, request id and record, metrics, drain), so an answer costs no
 * router, fiber or response object (docs/ARCHITECTURE.md, "The witness"). What the edge (http/Edge.ts)
 * would add is kept, but the Origin rule (logs call it, not browsers): the x-pv-internal-token rule, the bounded body read (413), UTF-8 (400), problem+json
 * refusals with the request id as `instance`, a request target whose percent-encoding is not UTF-8
 * (400); a 409 is the spec's `text/x.tlog.size` body.
 */
const addCheckpointHandler = (witness: Witness["Service"], internalTokenAccepted: (sent: string | ReadonlyArray<string> | undefined) => boolean) => {
  const failed = (res: ServerResponse, error: unknown) => {
    const failure = databaseFailure(error)
    if (failure !== undefined) countDatabaseError(failure)
    witness.logFailure(error)
    if (!res.headersSent) {
      sendProblem(res, failure === "unavailable"
        ? new Unavailable({ detail: "A dependency of the service is unavailable; retry shortly." })
        : new Internal({ detail: "The service failed to handle this request." }))
    }
  }
  const answered = (res: ServerResponse) => (answer: WitnessAnswer) => {
    if (answer.status !== 200 && answer.status !== 409) return sendProblem(res, problemOf(answer))
    res.writeHead(answer.status, { "content-type": answer.contentType, "content-length": Buffer.byteLength(answer.body), "cache-control": "no-store" })
    res.end(answer.body)
  }
  return (req: IncomingMessage, res: ServerResponse): void => {
    if (!internalTokenAccepted(req.headers["x-pv-internal-token"])) {
      return sendProblem(res, new Unauthorized({ detail: "The x-pv-internal-token header is not valid." }))
    }
    if (!decodesAsUtf8(req.url ?? "")) {
      return sendProblem(res, new BadRequest({ detail: "The request target's percent-encoding is not UTF-8." }))
    }
    readBoundedMessage(req, (read) => {
      if (read === "tooLarge") return sendProblem(res, new PayloadTooLarge({ detail: `Request bodies are limited to ${MaxBodyBytes} bytes.` }))
      if (read === "unreadable") return sendProblem(res, new BadRequest({ detail: "The request body could not be read." }))
      let body: string
      try {
        body = strictUtf8.decode(read)
      } catch {
        return sendProblem(res, new BadRequest({ detail: "The request body is not UTF-8." }))
      }
      witness.submit(body).then(answered(res)).catch((error: unknown) => failed(res, error))
    })
  }
}

const OriginHashPattern = /^[0-9a-f]{64}$/

/**
 * The witness's routes (docs/API.md, "Witnesses"): C2SP tlog-witness `POST /add-checkpoint` (the
 * submission prefix is the server's root), the monitoring API `GET /<origin hash>/checkpoint`, its key,
 * and the health endpoints. Refusals other than 409 are problem+json; a 409 is the spec's
 * `text/x.tlog.size` body.
 */
const WitnessRoutes = HttpRouter.use((router) =>
  Effect.gen(function*() {
    const witness = yield* Witness
    const sql = yield* PgClient.PgClient
    const frontDoor = yield* FrontDoor
    const handleAddCheckpoint = addCheckpointHandler(witness, internalTokenRule(yield* AppConfig))
    frontDoor.serveDirect("POST", "/add-checkpoint", handleAddCheckpoint)
    yield* router.add("GET", "/witness/key", HttpServerResponse.jsonUnsafe(witness.key))
    yield* router.add("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" }))
    yield* router.add("GET", "/readyz", () =>
      sql`SELECT max(migration_id) AS latest FROM effect_sql_migrations`.pipe(
        Effect.timeout("2 seconds"),
        Effect.map(([row]) => Number((row as { latest?: unknown } | undefined)?.latest ?? 0)),
        Effect.flatMap((latest) =>
          latest >= latestMigrationId
            ? Effect.succeed(HttpServerResponse.jsonUnsafe({ status: "ready", database: "ok", migrations: latest }))
            : problemAnswer(new Unavailable({ detail: "Migrations are not all applied." }))),
        Effect.catch(() => problemAnswer(new Unavailable({ detail: "The database is not reachable." })))
      ))
    yield* router.add("GET", "/:originHash/checkpoint", () =>
      Effect.gen(function*() {
        const { originHash } = yield* HttpRouter.params
        const note = OriginHashPattern.test(originHash ?? "") ? yield* witness.latestByOriginHash(originHash!) : Option.none<string>()
        return yield* Option.match(note, {
          onNone: () => problemAnswer(new NotFound({ detail: "This witness has cosigned no checkpoint of that log." })),
          onSome: (text) => Effect.succeed(HttpServerResponse.text(text, { contentType: "text/plain; charset=utf-8", headers: { "cache-control": "no-cache" } }))
        })
      }))
  }))

const RoutesLive = Layer.mergeAll(Layer.merge(WitnessRoutes, MetricsRouteLive).pipe(Layer.provide(ObserveRoutesLive)), EdgeLive)

/** A line naming the witness, its key and its logs once the port is open: what an operator pastes into a log's PV_LOG_WITNESSES. */
const Announce = Layer.effectDiscard(Effect.gen(function*() {
  const witness = yield* Witness
  const server = yield* HttpServer.HttpServer
  yield* Effect.logInfo(`witness ${witness.key.name} listening on ${HttpServer.formatAddress(server.address)}; verifier key ${witness.key.verifier_key}; logs ${witness.origins.join(", ")}`)
}))

/**
 * `pv witness serve`: the routes behind the same front door and edge as the service (connection and
 * header limits, in-flight cap, request ids, /metrics, drain on SIGTERM), over its own database (embedded in
 * PV_DATA_DIR, or DATABASE_URL) with every migration applied.
 */
export const WitnessServerLive = HttpRouter.serve(RoutesLive, { disableLogger: true, disableListenLog: true }).pipe(
  Layer.provideMerge(FrontDoorLive),
  Layer.provideMerge(Witness.layer),
  Layer.provideMerge(DatabaseLive)
)

/** The witness and its announcement: `pv witness serve` provides its settings (witness/Launch.ts). */
export const WitnessMainLive = Announce.pipe(Layer.provideMerge(WitnessServerLive))
