import { createHash, timingSafeEqual } from "node:crypto"
import type { IncomingMessage } from "node:http"
import type { Http2ServerRequest } from "node:http2"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Cause, Context, Effect, Exit, Layer, Option, Redacted, Result, Schema } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { type HttpApiEndpoint, HttpApiError, type HttpApiMiddleware } from "effect/http-api"
import { Caller } from "../api/Auth.js"
import { duplicateMemberOf, findUnstorable, MaxJsonDepth, exceedsDepth } from "../domain/Json.js"
import { rememberSuccesses } from "../domain/Memo.js"
import {
  FieldError,
  fieldErrorsOf,
  Internal,
  isProblemError,
  MalformedJson,
  PayloadTooLarge,
  type ProblemError,
  Unavailable,
  UnsupportedMediaType,
  ValidationFailed,
  withInstance
} from "../domain/Problem.js"
import { RequestGuard } from "../api/Guard.js"
import { announcesBody, currentInstance, keepCheckedJson, MaxBodyBytes, problemHeaders, problemResponse } from "../api/Problems.js"
import { countDatabaseError } from "../observability/Metrics.js"
import { databaseFailure } from "../platform/DatabaseErrors.js"
import { setMemoisedText } from "../domain/EffectInternals.js"

/**
 * REST bodies are `application/json` (parameters such as charset allowed). Other JSON-based types, such
 * as `application/merge-patch+json`, mean something else and are refused with 415 rather than guessed at.
 */
const isRestJsonContentType = (value: string | undefined) =>
  value !== undefined && /^application\/json\s*(;.*)?$/i.test(value.trim())

const hasJsonBody = (method: string) => method === "POST" || method === "PUT" || method === "PATCH"

const tokenDigest = (value: string) => createHash("sha256").update(value).digest()

const tooLarge = () => new PayloadTooLarge({ detail: `Request bodies are limited to ${MaxBodyBytes} bytes.` })

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** An answer given before the body was received in full closes the connection (nobody reads the rest). */
const closeAfterAnswer = HttpEffect.appendPreResponseHandler((_req, response) =>
  Effect.succeed(HttpServerResponse.setHeader(response, "connection", "close")))

/**
 * Reads the body, at most MaxBodyBytes, without destroying the socket when a (chunked) body runs over,
 * so the client still gets its 413; the edge closes the connection after that answer (its body was
 * not read to the end: http/Edge.ts). `unreadable` is what a failing stream (a client gone
 * mid-body) becomes. The one body reader of the service: REST bodies (below) and the MCP endpoint's raw
 * JSON-RPC text (mcp/Http.ts) both come through here.
 */
export const readBoundedBytes = <E>(request: HttpServerRequest.HttpServerRequest, unreadable: () => E): Effect.Effect<Buffer, PayloadTooLarge | E> =>
  readBoundedBytesThen(request, unreadable, Effect.succeed)

/**
 * `readBoundedBytes` followed by `then` (the fiber resumes with `then(bytes)` itself: no step in between),
 * for a handler that answers from the body in one step (mcp/Http.ts).
 */
export const readBoundedBytesThen = <E, A, E2, R>(
  request: HttpServerRequest.HttpServerRequest,
  unreadable: () => E,
  then: (bytes: Buffer) => Effect.Effect<A, E2, R>
): Effect.Effect<A, PayloadTooLarge | E | E2, R> =>
  Effect.callback<A, PayloadTooLarge | E | E2, R>((resume) => {
    readBoundedMessage(NodeHttpServerRequest.toIncomingMessage(request), (read) => {
      if (read === "tooLarge") resume(Effect.fail(tooLarge()))
      else if (read === "unreadable") resume(Effect.fail(unreadable()))
      else resume(then(read))
    })
  })

/**
 * The reading itself, on the Node request (readBoundedBytes above; the witness's plain `node:http` handler
 * of POST /add-checkpoint, src/witness/WitnessServer.ts): `done` gets the body, or "tooLarge" once more than
 * MaxBodyBytes arrived (the stream is paused, not destroyed), or "unreadable" if the stream fails.
 */
export const readBoundedMessage = (incoming: IncomingMessage | Http2ServerRequest, done: (read: Buffer | "tooLarge" | "unreadable") => void): void => {
  // A body that is already here in full (the front door starts a request with a small body once it is parsed:
  // http/FrontDoor.ts) is taken at once, with no events to wait for.
  if (
    incoming.complete && incoming.httpVersionMajor === 1 && !incoming.destroyed && !incoming.readableFlowing &&
    incoming.readableLength <= MaxBodyBytes
  ) {
    if (incoming.readableEnded) return done(Buffer.alloc(0))
    const whole: Buffer | null = incoming.readableLength === 0 ? null : incoming.read()
    if (whole !== null) return done(whole)
  }
  const chunks: Array<Buffer> = []
  let bytes = 0
  const cleanup = () => {
    incoming.off("data", onData)
    incoming.off("end", onEnd)
    incoming.off("error", onError)
  }
  const onData = (chunk: Buffer) => {
    bytes += chunk.length
    if (bytes > MaxBodyBytes) {
      cleanup()
      incoming.pause()
      done("tooLarge")
    } else chunks.push(chunk)
  }
  const onEnd = () => {
    cleanup()
    done(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks))
  }
  const onError = () => {
    cleanup()
    done("unreadable")
  }
  incoming.on("data", onData)
  incoming.once("end", onEnd)
  incoming.once("error", onError)
}

/**
 * The `x-pv-internal-token` rule (docs/API.md §3.5) for `config`: false when PV_INTERNAL_TOKEN is set
 * and the request carries the header with another value; the header never grants anything.
 */
export const internalTokenRule = (config: { readonly internalToken: Option.Option<Redacted.Redacted> }) => {
  const expected = Option.map(config.internalToken, (t) => tokenDigest(Redacted.value(t)))
  return (sent: string | ReadonlyArray<string> | undefined): boolean =>
    Option.isNone(expected) || sent === undefined || timingSafeEqual(tokenDigest(String(sent)), expected.value)
}

/** The body as text; invalid UTF-8 is malformed JSON (RFC 8259 section 8.1), never silently replaced. */
const readBoundedBody = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<string, PayloadTooLarge | MalformedJson> =>
  Effect.flatMap(
    readBoundedBytes(request, () => new MalformedJson({ detail: "The request body could not be read." })),
    (bytes) => {
      try {
        return Effect.succeed(strictUtf8.decode(bytes))
      } catch {
        return Effect.fail(new MalformedJson({ detail: "The request body is not valid UTF-8." }))
      }
    }
  )

/** A REST body's text (read bounded, as UTF-8): JSON without repeated member names, not too deep, and nothing in it the database could not keep. */
export const checkRestText = (text: string): Result.Result<unknown, ProblemError> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return Result.fail(new MalformedJson({ detail: "The request body is not valid JSON." }))
  }
  const duplicate = duplicateMemberOf(text, parsed)
  if (duplicate !== undefined) {
    return Result.fail(new MalformedJson({
      detail: "The request body repeats a member name in one object (I-JSON, RFC 7493): which value counts would be ambiguous.",
      errors: [new FieldError({ pointer: duplicate, detail: "duplicate member name" })]
    }))
  }
  if (exceedsDepth(parsed, MaxJsonDepth)) {
    return Result.fail(new ValidationFailed({
      detail: `JSON nesting deeper than ${MaxJsonDepth} levels is not accepted.`,
      errors: [new FieldError({ pointer: "", detail: `nesting deeper than ${MaxJsonDepth} levels` })]
    }))
  }
  const unstorable = findUnstorable(parsed)
  if (unstorable !== undefined) {
    return Result.fail(new ValidationFailed({
      detail: "The request body holds text that cannot be stored.",
      errors: [new FieldError({ pointer: unstorable.pointer, detail: unstorable.reason })]
    }))
  }
  return Result.succeed(parsed)
}

/** Bodies of at most this many characters have their checks remembered (`restTextChecks`). */
const RememberedBodyMaxChars = 2048

export interface RestText {
  /** Whose body it is: the calling key's id, or "" for requests without one (the operator's). */
  readonly caller: string
  readonly text: string
}

/**
 * `checkRestText`, its successes remembered per caller and text (the last 256, each at most
 * RememberedBodyMaxChars): a client that sends a body again (an idempotent retry, a receipt replay) gets
 * the value checked the first time, as it would get it again, without parsing and scanning it again. The
 * value is shared by those requests and never changed by anyone. Keyed by the caller too, so no key's
 * requests get faster because another key sent the same body (no timing signal between keys).
 */
export const restTextChecks = () =>
  rememberSuccesses(
    ({ caller, text }: RestText) => (text.length <= RememberedBodyMaxChars ? `${caller}\u0000${text}` : undefined),
    ({ text }: RestText) => checkRestText(text)
  )

/** A REST body: bounded, UTF-8, then `checks` (checkRestText, remembered); its value is kept for `checkedJsonOf`. */
const readRestBody = (
  request: HttpServerRequest.HttpServerRequest,
  checks: (body: RestText) => Result.Result<unknown, ProblemError>
): Effect.Effect<string, ProblemError> =>
  Effect.flatMap(readBoundedBody(request), (text) =>
    Effect.flatMap(Effect.serviceOption(Caller), (caller): Effect.Effect<string, ProblemError> => {
      const checked = checks({ caller: Option.isSome(caller) ? caller.value.key_id : "", text })
      if (Result.isFailure(checked)) return Effect.fail(checked.failure)
      keepCheckedJson(request, checked.success)
      return Effect.succeed(text)
    }))

/**
 * The body is read only when a handler asks for it, i.e. after authentication: a request that will be
 * refused never has its body buffered. The request's `text` (what HttpApi's payload decoder reads) becomes
 * this checked, cached read; everything else is the request's own. A refusal reaches the decoder as a
 * defect holding our problem, which the guard turns back into it.
 *
 * @effect/platform-node's request memoises its text in a private field (domain/EffectInternals.ts, `setMemoisedText`) that its `text` getter
 * returns once set: the read is stored there, and the pipeline goes on with the same request object. (A
 * view, `Object.create(request)` with its own `text`, made the request a prototype, a slow object for every
 * later access, and needed the view provided as the request: ~2 % of a receipt replay's CPU.) A request
 * without that field, or one whose text was already asked for, gets the view, as before.
 */
/**
 * `read` run at most once, in the fiber that first asks (the payload decoder, once per request), its outcome
 * kept for any later ask; an interrupted read is not kept. (`Effect.cached`, run by `runSync`, cost two fibers
 * and a join per request.) Two concurrent asks would both listen to the body and both see all of it.
 */
const readOnce = <A, E>(read: Effect.Effect<A, E>): Effect.Effect<A, E> => {
  let outcome: Exit.Exit<A, E> | undefined
  return Effect.suspend(() =>
    outcome ?? Effect.onExit(read, (exit) => Effect.sync(() => {
      if (!Exit.hasInterrupts(exit)) outcome = exit
    })))
}

const withCheckedBody = (
  request: HttpServerRequest.HttpServerRequest,
  read: Effect.Effect<string, ProblemError>
): HttpServerRequest.HttpServerRequest => {
  const text = readOnce(read)
  if (setMemoisedText(request, text)) return request
  return Object.create(request, { text: { value: text } }) as HttpServerRequest.HttpServerRequest
}

/** Paths whose bodies are parsed by their own protocol (JSON-RPC answers parse errors itself). */
const rawBodyPaths: ReadonlySet<string> = new Set(["/api/v1/mcp"])

const pathOf = (url: string) => {
  const q = url.indexOf("?")
  return q === -1 ? url : url.slice(0, q)
}

/** HttpApi's decode failures become the 422 of docs/API.md §5 with one JSON pointer per failing member. */
export const schemaProblem = (error: HttpApiError.HttpApiSchemaError): ProblemError => {
  // Encoding our own response failed: that is ours, not the client's.
  if (error.kind === "Body" || error.kind === "ResponseHeaders") {
    return new Internal({ detail: "The service failed to handle this request." })
  }
  return new ValidationFailed({ detail: "The request failed validation.", errors: fieldErrorsOf(error.cause.issue) })
}

/** A cause that is not one of our problems (defects, interruption) as the problem it is answered with. */
export const defectProblem = (cause: Cause.Cause<unknown>): Effect.Effect<ProblemError> =>
  Effect.gen(function*() {
    // The client went away mid-request: nobody is left to answer, and nothing failed.
    if (Cause.hasInterruptsOnly(cause)) return new Unavailable({ detail: "The request was abandoned." })
    const squashed = Cause.squash(cause)
    // The payload decoder turns a refused body read (withCheckedBody) into a defect: the problem is still ours.
    if (isProblemError(squashed)) return squashed
    if (HttpApiError.HttpApiSchemaError.is(squashed)) return schemaProblem(squashed)
    // SQLSTATE class 22 is the client's data (422); any other database failure is an outage (503).
    const failure = databaseFailure(squashed)
    if (failure !== undefined) countDatabaseError(failure)
    if (failure === "input") return new ValidationFailed({ detail: "The request holds a value the database cannot store." })
    yield* Effect.logError("request failed", cause)
    return failure === "unavailable"
      ? new Unavailable({ detail: "A dependency of the service is unavailable; retry shortly." })
      : new Internal({ detail: "The service failed to handle this request." })
  })

/** Can HttpApi's encoder answer `problem` for this endpoint (declared by it or by one of its middlewares)? */
const isDeclared = (endpoint: HttpApiEndpoint.Top, problem: ProblemError): boolean =>
  [...endpoint.error, ...[...endpoint.middlewares].flatMap((middleware) => [...(middleware as HttpApiMiddleware.AnyService).error])]
    .some((schema) => Schema.is(schema)(problem))

/**
 * `RequestGuard` (src/api/Guard.ts), the outermost middleware of every API endpoint: the body guard
 * (413 by Content-Length, 415, and a deferred bounded read giving 413/400/422), then, for whatever the
 * endpoint fails with, the problem's `instance` (the request id) and headers. A declared problem is
 * encoded by HttpApi from its class; decode failures become 422, defects 500/503. A problem the
 * endpoint did not declare (which HttpApi could not encode) is rendered here, in the same format.
 */
export const RequestGuardLive = Layer.sync(RequestGuard, () => {
  const checks = restTextChecks()
  return (httpEffect, { endpoint }) =>
    Effect.withFiber<
      Effect.Success<typeof httpEffect>,
      Effect.Error<typeof httpEffect> | PayloadTooLarge | UnsupportedMediaType,
      Effect.Services<typeof httpEffect> | HttpServerRequest.HttpServerRequest
    >((fiber) => {
      const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
      // An operation that takes no payload (POST …/resume) may come without a body, and so without a type.
      const bodiless = endpoint.payload.size === 0 && !announcesBody(request.headers)
      if (hasJsonBody(request.method) && !bodiless) {
        const length = Number(request.headers["content-length"] ?? "0")
        if (length > MaxBodyBytes) return Effect.andThen(closeAfterAnswer, Effect.fail(tooLarge()))
        // JSON-RPC answers its own parse errors and media types, reading its body itself (mcp/Http.ts).
        if (!rawBodyPaths.has(pathOf(request.url))) {
          if (!isRestJsonContentType(request.headers["content-type"])) {
            return Effect.fail(new UnsupportedMediaType({ detail: "Send the request body as application/json." }))
          }
          const checked = withCheckedBody(request, readRestBody(request, checks))
          return checked === request ? httpEffect : Effect.provideService(httpEffect, HttpServerRequest.HttpServerRequest, checked)
        }
      }
      return httpEffect
    }).pipe(
      Effect.catchCause((cause) =>
        Effect.gen(function*() {
          const failure = Cause.findErrorOption(cause)
          let problem: ProblemError
          if (Option.isSome(failure) && isProblemError(failure.value)) problem = failure.value
          else if (Option.isSome(failure) && HttpApiError.HttpApiSchemaError.is(failure.value)) problem = schemaProblem(failure.value)
          else if (Option.isSome(failure)) return yield* Effect.failCause(cause)
          else problem = yield* defectProblem(cause)
          const instance = yield* currentInstance
          if (!isDeclared(endpoint, problem)) return problemResponse(problem, instance)
          const headers = problemHeaders(problem)
          if (Object.keys(headers).length > 0) {
            yield* HttpEffect.appendPreResponseHandler((_req, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers)))
          }
          // Declared by the endpoint or one of its middlewares (checked above), so HttpApi encodes it.
          return yield* Effect.fail((instance === undefined ? problem : withInstance(problem, instance)) as never)
        })
      )
    )
})

/** Percent-encoding that does not decode to UTF-8 (`%ff`, an encoded lone surrogate) is a bad request. */
export const decodesAsUtf8 = (url: string): boolean => {
  // Without a `%` there is nothing to decode (and nothing to throw on).
  if (url.indexOf("%") === -1) return true
  try {
    decodeURIComponent(url)
    return true
  } catch {
    return false
  }
}
