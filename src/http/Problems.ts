import { HttpApiBuilder, HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { timingSafeEqual, createHash } from "node:crypto"
import { Cause, Effect, Option, Redacted } from "effect"
import { findUnstorable } from "../domain/Json.js"
import {
  BadRequest,
  FieldError,
  Internal,
  isProblemError,
  MalformedJson,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  type ProblemError,
  toProblemDocument,
  Unauthorized,
  Unavailable,
  UnsupportedMediaType,
  ValidationFailed
} from "../domain/Problem.js"
import { countDatabaseError } from "../observability/Metrics.js"
import { problemInstance, requestIdOf } from "../observability/RequestRecord.js"
import { AppConfig } from "../platform/Config.js"

/** Contract section 0: bodies over 64 KiB are refused before they are read in full. */
export const MaxBodyBytes = 64 * 1024

const realm = `Bearer realm="pv"`

/** One problem → one problem+json response, with the contract's authentication and retry headers. */
export const problemResponse = (error: ProblemError, instance?: string): HttpServerResponse.HttpServerResponse => {
  const document = toProblemDocument(error, instance)
  const headers: Record<string, string> = {}
  switch (error._tag) {
    case "Unauthorized":
      headers["www-authenticate"] = `${realm}, error="invalid_token"`
      break
    case "InsufficientScope":
      headers["www-authenticate"] = `${realm}, error="insufficient_scope", scope="${error.scope}"`
      break
    case "RateLimited":
    case "QuotaExceeded":
    case "NotYetLogged":
      headers["retry-after"] = String(Math.max(1, Math.ceil(error.retry_after)))
      break
    // A dependency that is down or a process at capacity: worth retrying soon (CONTRACT section 11).
    case "Unavailable":
    case "Overloaded":
      headers["retry-after"] = "1"
      break
  }
  return HttpServerResponse.text(JSON.stringify(document), {
    status: document.status,
    contentType: "application/problem+json",
    headers
  })
}

const escapePointer = (segment: PropertyKey) => String(segment).replace(/~/g, "~0").replace(/\//g, "~1")

export const toPointer = (path: ReadonlyArray<PropertyKey>): string => path.map((segment) => "/" + escapePointer(segment)).join("")

interface DecodeIssue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** HttpApi's schema failures become the contract's 422 with one pointer per failing field. */
export const validationProblem = (issues: ReadonlyArray<DecodeIssue>): ValidationFailed =>
  new ValidationFailed({
    detail: "The request failed validation.",
    errors: issues.map((issue) => new FieldError({ pointer: toPointer(issue.path), detail: issue.message }))
  })

/** Deeper documents are refused before any decoding work (no legitimate body nests this far). */
export const MaxJsonDepth = 32

/** Depth of a parsed JSON value, iteratively, stopping as soon as `limit` is passed. */
export const exceedsDepth = (value: unknown, limit: number): boolean => {
  const stack: Array<[unknown, number]> = [[value, 1]]
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!
    if (typeof current !== "object" || current === null) continue
    if (depth > limit) return true
    for (const child of Array.isArray(current) ? current : Object.values(current)) stack.push([child, depth + 1])
  }
  return false
}

/**
 * REST bodies are `application/json` (parameters such as charset allowed). Other JSON-based types, such
 * as `application/merge-patch+json`, mean something else and are refused with 415 rather than guessed at.
 */
export const isRestJsonContentType = (value: string | undefined) =>
  value !== undefined && /^application\/json\s*(;.*)?$/i.test(value.trim())

const hasJsonBody = (method: string) => method === "POST" || method === "PUT" || method === "PATCH"

const tokenDigest = (value: string) => createHash("sha256").update(value).digest()

const tooLarge = () => new PayloadTooLarge({ detail: `Request bodies are limited to ${MaxBodyBytes} bytes.` })

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/**
 * Reads the body, at most MaxBodyBytes, without destroying the socket when a (chunked) body runs over,
 * so the client still gets its 413; the connection is closed after that answer. Invalid UTF-8 is
 * malformed JSON (RFC 8259 section 8.1), never silently replaced.
 */
const readBoundedBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.async<string, PayloadTooLarge | MalformedJson>((resume) => {
    const incoming = NodeHttpServerRequest.toIncomingMessage(request)
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
        resume(Effect.zipRight(
          HttpApp.appendPreResponseHandler((_req, response) => Effect.succeed(HttpServerResponse.setHeader(response, "connection", "close"))),
          Effect.fail(tooLarge())
        ))
      } else chunks.push(chunk)
    }
    const onEnd = () => {
      cleanup()
      try {
        resume(Effect.succeed(strictUtf8.decode(Buffer.concat(chunks))))
      } catch {
        resume(Effect.fail(new MalformedJson({ detail: "The request body is not valid UTF-8." })))
      }
    }
    const onError = () => {
      cleanup()
      resume(Effect.fail(new MalformedJson({ detail: "The request body could not be read." })))
    }
    incoming.on("data", onData)
    incoming.once("end", onEnd)
    incoming.once("error", onError)
  })

/** A REST body: bounded, UTF-8, JSON, not too deep, and nothing in it the database could not keep. */
const readRestBody = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<string, ProblemError> =>
  Effect.flatMap(readBoundedBody(request), (text): Effect.Effect<string, ProblemError> => {
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return Effect.fail(new MalformedJson({ detail: "The request body is not valid JSON." }))
    }
    if (exceedsDepth(parsed, MaxJsonDepth)) {
      return Effect.fail(new ValidationFailed({
        detail: `JSON nesting deeper than ${MaxJsonDepth} levels is not accepted.`,
        errors: [new FieldError({ pointer: "", detail: `nesting deeper than ${MaxJsonDepth} levels` })]
      }))
    }
    const unstorable = findUnstorable(parsed)
    if (unstorable !== undefined) {
      return Effect.fail(new ValidationFailed({
        detail: "The request body holds text that cannot be stored.",
        errors: [new FieldError({ pointer: unstorable.pointer, detail: unstorable.reason })]
      }))
    }
    return Effect.succeed(text)
  })

/**
 * The body is read only when a handler asks for it, i.e. after authentication: a request that will be
 * refused never has its body buffered. `textEffect` is the field @effect/platform-node caches
 * `request.text` in, so HttpApi's decoder and the MCP handler both get the checked text.
 */
const deferBodyReading = (request: HttpServerRequest.HttpServerRequest, read: Effect.Effect<string, ProblemError>) => {
  ;(request as unknown as { textEffect?: Effect.Effect<string, ProblemError> }).textEffect = Effect.runSync(Effect.cached(read))
}

/** Percent-encoding that does not decode to UTF-8 (`%ff`, an encoded lone surrogate) is a bad request. */
const decodesAsUtf8 = (url: string) => {
  try {
    decodeURIComponent(url)
    return true
  } catch {
    return false
  }
}

/** Paths whose bodies are parsed by their own protocol (JSON-RPC answers parse errors itself). */
const rawBodyPaths = new Set(["/api/v1/mcp"])

const pathOf = (url: string) => {
  const q = url.indexOf("?")
  return q === -1 ? url : url.slice(0, q)
}

/** A problem's `instance`: the request id the front door settled on (CONTRACT section 11), else the path. */
export const instanceOf = (request: HttpServerRequest.HttpServerRequest): string => {
  const id = requestIdOf(request)
  return id === undefined ? pathOf(request.url) : problemInstance(id)
}

/**
 * The outermost API middleware: refuses oversized, non-JSON and unparseable bodies before any routing
 * or authentication work, checks x-pv-internal-token, and renders every failure (domain errors,
 * decode errors, unknown routes, defects) as problem+json. Nothing internal leaves in an error body.
 */
export const ProblemsLive = HttpApiBuilder.middleware(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const internalToken = Option.map(config.internalToken, (t) => tokenDigest(Redacted.value(t)))
    return (app) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const path = pathOf(request.url)
        const sentInternal = request.headers["x-pv-internal-token"]
        if (Option.isSome(internalToken) && sentInternal !== undefined &&
          !timingSafeEqual(tokenDigest(sentInternal), internalToken.value)) {
          return yield* Effect.fail(new Unauthorized({ detail: "The x-pv-internal-token header is not valid." }))
        }
        if (!decodesAsUtf8(request.url)) {
          return yield* Effect.fail(new BadRequest({ detail: "The request target's percent-encoding is not UTF-8." }))
        }
        if (hasJsonBody(request.method)) {
          const length = Number(request.headers["content-length"] ?? "0")
          if (length > MaxBodyBytes) return yield* Effect.fail(tooLarge())
          // JSON-RPC answers its own parse errors and media types (mcp/Mcp.ts).
          if (rawBodyPaths.has(path)) deferBodyReading(request, readBoundedBody(request))
          else if (!isRestJsonContentType(request.headers["content-type"])) {
            return yield* Effect.fail(new UnsupportedMediaType({ detail: "Send the request body as application/json." }))
          } else deferBodyReading(request, readRestBody(request))
        }
        return yield* app
      }).pipe(
        Effect.catchAll((error: unknown) => Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          Effect.succeed(problemResponse(classify(error), instanceOf(request))))),
        Effect.catchAllCause((cause) =>
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            // The client went away mid-request: nobody is left to answer, and nothing failed.
            if (Cause.isInterruptedOnly(cause)) return problemResponse(new Unavailable({ detail: "The request was abandoned." }), instanceOf(request))
            const squashed = Cause.squash(cause)
            // HttpApi's payload decoder turns a failed body read into a defect: the problem is still ours.
            if (isProblemError(squashed)) return problemResponse(squashed, instanceOf(request))
            const failure = databaseFailure(squashed)
            if (failure !== undefined) countDatabaseError(failure)
            if (failure === "input") {
              return problemResponse(new ValidationFailed({ detail: "The request holds a value the database cannot store." }), instanceOf(request))
            }
            yield* Effect.logError("request failed", cause)
            return problemResponse(
              failure === "unavailable"
                ? new Unavailable({ detail: "A dependency of the service is unavailable; retry shortly." })
                : new Internal({ detail: "The service failed to handle this request." }),
              instanceOf(request)
            )
          }))
      )
  }),
  { withContext: true }
)

/**
 * A database failure is the client's when PostgreSQL refused the data itself (SQLSTATE class 22, data
 * exception: out-of-range integers, NUL, untranslatable characters), so it is answered 422 and never
 * mistaken for an outage; any other database failure means the database is unavailable.
 */
const databaseFailure = (error: unknown): "input" | "unavailable" | undefined => {
  if (typeof error !== "object" || error === null || (error as { _tag?: string })._tag !== "SqlError") return undefined
  const code = (error as { cause?: { code?: unknown } }).cause?.code
  return typeof code === "string" && code.startsWith("22") ? "input" : "unavailable"
}

/** Failures of the error channel: domain problems, and HttpApi's own (decode, routing). */
const classify = (error: unknown): ProblemError => {
  if (isProblemError(error)) return error
  const tag = typeof error === "object" && error !== null ? (error as { _tag?: string })._tag : undefined
  switch (tag) {
    case "HttpApiDecodeError":
      return validationProblem((error as { issues: ReadonlyArray<DecodeIssue> }).issues)
    case "RouteNotFound":
      return new NotFound({ detail: "No such resource." })
    case "RequestError":
      return new MalformedJson({ detail: "The request body could not be read." })
    case "MethodNotAllowed":
      return new MethodNotAllowed({ detail: "This method is not allowed on this resource." })
  }
  return new Internal({ detail: "The service failed to handle this request." })
}
