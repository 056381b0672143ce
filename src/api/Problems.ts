import { Context, Effect, Fiber } from "effect"
import { HttpServerResponse } from "effect/http"
import type { HttpServerRequest } from "effect/http"
import { MethodNotAllowed, ProblemContentType, type ProblemError, renderProblem } from "../domain/Problem.js"
import { problemInstance, RequestId } from "../observability/RequestRecord.js"

/** docs/API.md §4.3: bodies over 64 KiB are refused before they are read in full. */
export const MaxBodyBytes = 64 * 1024

/** Whether a request's headers announce a body (chunked, or a Content-Length above 0). */
export const announcesBody = (headers: { readonly [name: string]: string | ReadonlyArray<string> | undefined }): boolean =>
  headers["transfer-encoding"] !== undefined || Number(headers["content-length"] ?? "0") > 0

/** Called by the guard once a REST body passed its checks: the value it parsed, kept on the request's record for `checkedJsonOf`. */
export const keepCheckedJson = (_request: HttpServerRequest.HttpServerRequest, value: unknown): void => {
  const fiber = Fiber.getCurrent()
  const record = fiber === undefined ? undefined : Context.get(fiber.context, RequestId)
  if (record !== undefined) record.checkedJson = value
}

/**
 * For a raw handler (`handleRaw`) of an endpoint whose payload is any JSON value: the body exactly as HttpApi's
 * payload decoder would hand it over, without parsing it a second time. Reading it is reading the request's
 * `text`, the guard's bounded, checked read, so its refusals (413, 400, 422) are the guard's, as for a decoded
 * payload (a defect holding the problem, which the guard turns back into it).
 */
export const checkedJsonOf = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<unknown> =>
  Effect.flatMap(Effect.orDie(request.text), () =>
    Effect.flatMap(Effect.service(RequestId), (record) => {
      const value = record?.checkedJson
      return value === undefined ? Effect.die(new Error("the request body was not checked by the request guard")) : Effect.succeed(value)
    }))

export { problemHeaders } from "../domain/Problem.js"

/**
 * One problem → one problem+json response with its headers, for answers given outside an endpoint's
 * declared errors (raw handlers, unknown routes, refusals before routing, defects).
 */
export const problemResponse = (error: ProblemError, instance?: string): HttpServerResponse.HttpServerResponse => {
  const { status, headers, body } = renderProblem(error, instance)
  return HttpServerResponse.text(body, { status, contentType: ProblemContentType, headers })
}

/** The current request's `instance`: its request id (docs/API.md §5.1, §13), from the edge (http/Edge.ts). */
export const currentInstance: Effect.Effect<string | undefined> = Effect.map(
  Effect.service(RequestId),
  (record) => (record === undefined ? undefined : problemInstance(record.id))
)

/** `problemResponse` for the current request, its `instance` naming the request id. */
export const problemAnswer = (error: ProblemError): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.map(currentInstance, (instance) => problemResponse(error, instance))

/** 405 `method-not-allowed` for the current request, with `Allow` naming the methods the path takes. */
export const methodNotAllowedAnswer = (detail: string, allow: string): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.map(problemAnswer(new MethodNotAllowed({ detail })), (response) => HttpServerResponse.setHeader(response, "allow", allow))
