import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import type { HttpServerRequest } from "effect/http"
import { type ProblemError, toProblemDocument } from "../domain/Problem.js"
import { problemInstance, requestIdOf } from "../observability/RequestRecord.js"

/** docs/API.md §4.3: bodies over 64 KiB are refused before they are read in full. */
export const MaxBodyBytes = 64 * 1024

/** Where RequestGuardLive (src/http/Problems.ts) leaves the JSON value of a REST body it read and checked. */
const CheckedJson = Symbol.for("pv/CheckedJson")

/** Called by the guard once a REST body passed its checks: the value it parsed, for `checkedJsonOf`. */
export const keepCheckedJson = (request: HttpServerRequest.HttpServerRequest, value: unknown): void => {
  ;(request as unknown as Record<symbol, unknown>)[CheckedJson] = value
}

/**
 * For a raw handler (`handleRaw`) of an endpoint whose payload is any JSON value: the body exactly as HttpApi's
 * payload decoder would hand it over, without parsing it a second time. Reading it is reading the request's
 * `text`, the guard's bounded, checked read, so its refusals (413, 400, 422) are the guard's, as for a decoded
 * payload (a defect holding the problem, which the guard turns back into it).
 */
export const checkedJsonOf = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<unknown> =>
  Effect.flatMap(Effect.orDie(request.text), () => {
    const value = (request as unknown as Record<symbol, unknown>)[CheckedJson]
    return value === undefined ? Effect.die(new Error("the request body was not checked by the request guard")) : Effect.succeed(value)
  })

const realm = `Bearer realm="pv"`

/**
 * The headers that go with a problem (docs/API.md §5.1): how to authenticate, and when to retry.
 * HttpApi encodes the body of a declared problem; these are added to that response (src/http/Problems.ts).
 */
export const problemHeaders = (error: ProblemError): Record<string, string> => {
  switch (error._tag) {
    case "Unauthorized":
      return { "www-authenticate": `${realm}, error="invalid_token"` }
    case "InsufficientScope":
      return { "www-authenticate": `${realm}, error="insufficient_scope", scope="${error.scope}"` }
    case "RateLimited":
    case "QuotaExceeded":
    case "NotYetLogged":
      return { "retry-after": String(Math.max(1, Math.ceil(error.retry_after))) }
    // A dependency that is down or a process at capacity: worth retrying soon (docs/API.md §13).
    case "Unavailable":
    case "Overloaded":
      return { "retry-after": "1" }
    default:
      return {}
  }
}

/**
 * One problem → one problem+json response with its headers, for answers given outside an endpoint's
 * declared errors (raw handlers, unknown routes, refusals before routing, defects).
 */
export const problemResponse = (error: ProblemError, instance?: string): HttpServerResponse.HttpServerResponse => {
  const document = toProblemDocument(error, instance)
  return HttpServerResponse.text(JSON.stringify(document), {
    status: document.status,
    contentType: "application/problem+json",
    headers: problemHeaders(error)
  })
}

const pathOf = (url: string) => {
  const q = url.indexOf("?")
  return q === -1 ? url : url.slice(0, q)
}

/** A problem's `instance`: the request id the front door settled on (docs/API.md §5.1, §13), else the path. */
export const instanceOf = (request: HttpServerRequest.HttpServerRequest): string => {
  const id = requestIdOf(request)
  return id === undefined ? pathOf(request.url) : problemInstance(id)
}
