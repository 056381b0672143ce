import { ByteSize, Effect, Layer, Option } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { instanceOf, MaxBodyBytes, problemResponse } from "../api/Problems.js"
import { BadRequest, Forbidden, NotFound, PayloadTooLarge, Unavailable, ValidationFailed, type ProblemError } from "../domain/Problem.js"
import { FrontDoorLive } from "../http/FrontDoor.js"
import { RouterProblemsLive } from "../http/Problems.js"
import { ObserveRoutesLive } from "../observability/Routes.js"
import { AppConfig, baseAppConfig } from "../platform/Config.js"
import { DatabaseLive, latestMigrationId } from "../platform/Database.js"
import { PgClient } from "@effect/sql-pg"
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

/** The body as UTF-8 text, at most MaxBodyBytes (413 beyond); bytes that are not UTF-8 are a bad request. */
const readBody = (request: HttpServerRequest.HttpServerRequest) =>
  request.arrayBuffer.pipe(
    Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(MaxBodyBytes)),
    Effect.mapError(() => new PayloadTooLarge({ detail: `Request bodies are limited to ${MaxBodyBytes} bytes.` })),
    Effect.filterOrFail((bytes) => bytes.byteLength <= MaxBodyBytes, () => new PayloadTooLarge({ detail: `Request bodies are limited to ${MaxBodyBytes} bytes.` })),
    Effect.flatMap((bytes) => {
      try {
        return Effect.succeed(strictUtf8.decode(bytes))
      } catch {
        return Effect.fail(new BadRequest({ detail: "The request body is not UTF-8." }))
      }
    })
  )

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
    yield* router.add("POST", "/add-checkpoint", (request) =>
      readBody(request).pipe(
        Effect.flatMap(witness.addCheckpoint),
        Effect.map((answer) => {
          if (answer.status === 200 || answer.status === 409) {
            return HttpServerResponse.text(answer.body, { status: answer.status, contentType: answer.contentType, headers: { "cache-control": "no-store" } })
          }
          return problemResponse(problemOf(answer), instanceOf(request))
        }),
        Effect.catch((problem: ProblemError) => Effect.succeed(problemResponse(problem, instanceOf(request))))
      ))
    yield* router.add("GET", "/witness/key", HttpServerResponse.jsonUnsafe(witness.key))
    yield* router.add("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" }))
    yield* router.add("GET", "/readyz", (request) =>
      sql`SELECT max(migration_id) AS latest FROM effect_sql_migrations`.pipe(
        Effect.timeout("2 seconds"),
        Effect.map(([row]) => Number((row as { latest?: unknown } | undefined)?.latest ?? 0)),
        Effect.map((latest) =>
          latest >= latestMigrationId
            ? HttpServerResponse.jsonUnsafe({ status: "ready", database: "ok", migrations: latest })
            : problemResponse(new Unavailable({ detail: "Migrations are not all applied." }), instanceOf(request))),
        Effect.catch(() => Effect.succeed(problemResponse(new Unavailable({ detail: "The database is not reachable." }), instanceOf(request))))
      ))
    yield* router.add("GET", "/:originHash/checkpoint", (request) =>
      Effect.gen(function*() {
        const { originHash } = yield* HttpRouter.params
        const note = OriginHashPattern.test(originHash ?? "") ? yield* witness.latestByOriginHash(originHash!) : Option.none<string>()
        return Option.match(note, {
          onNone: () => problemResponse(new NotFound({ detail: "This witness has cosigned no checkpoint of that log." }), instanceOf(request)),
          onSome: (text) => HttpServerResponse.text(text, { contentType: "text/plain; charset=utf-8", headers: { "cache-control": "no-cache" } })
        })
      }))
  }))

const RoutesLive = Layer.mergeAll(WitnessRoutes.pipe(Layer.provide(ObserveRoutesLive)), RouterProblemsLive)

/** A line naming the witness, its key and its logs once the port is open: what an operator pastes into a log's PV_LOG_WITNESSES. */
const Announce = Layer.effectDiscard(Effect.gen(function*() {
  const witness = yield* Witness
  const server = yield* HttpServer.HttpServer
  yield* Effect.logInfo(`witness ${witness.key.name} listening on ${HttpServer.formatAddress(server.address)}; verifier key ${witness.key.verifier_key}; logs ${witness.origins.join(", ")}`)
}))

/**
 * `pv witness serve`: the routes behind the same front door as the service (connection and header
 * limits, in-flight cap, request ids, /metrics, drain on SIGTERM), over its own database (embedded in
 * PV_DATA_DIR, or DATABASE_URL) with every migration applied.
 */
export const WitnessServerLive = HttpRouter.serve(RoutesLive, { disableLogger: true, disableListenLog: true }).pipe(
  Layer.provideMerge(FrontDoorLive),
  Layer.provideMerge(Witness.layer),
  Layer.provideMerge(DatabaseLive)
)

/** The witness with its settings read from the current ConfigProvider (the process environment in `pv`). */
export const WitnessMainLive = Announce.pipe(
  Layer.provideMerge(WitnessServerLive),
  Layer.provide(Layer.effect(AppConfig, baseAppConfig))
)
