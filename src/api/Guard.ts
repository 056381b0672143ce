import { HttpApiMiddleware } from "effect/http-api"
import { Internal, MalformedJson, PayloadTooLarge, Unavailable, UnsupportedMediaType, ValidationFailed } from "../domain/Problem.js"

/**
 * The API-wide middleware (its implementation is the server's, src/http/RequestGuard.ts). It runs outside every
 * endpoint's own middleware, so before authentication and payload decoding: it refuses oversized, non-JSON
 * and unparseable bodies, turns decode failures into 422 `validation-failed` with JSON pointers, and a
 * defect into 500 `internal` (503 `unavailable` when the database is down). Declaring these errors here is
 * what documents them on every operation of the OpenAPI document.
 */
export class RequestGuard extends HttpApiMiddleware.Service<RequestGuard>()("pv/RequestGuard", {
  error: [MalformedJson, PayloadTooLarge, UnsupportedMediaType, ValidationFailed, Internal, Unavailable]
}) {}
