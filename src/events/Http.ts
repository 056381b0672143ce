import { Effect, Layer, Scope } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Caller } from "../access/Auth.js"
import { Api } from "../api/Api.js"
import { methodNotAllowedAnswer } from "../api/Problems.js"
import { FieldError, ValidationFailed } from "../domain/Problem.js"
import { requirePublicId } from "../domain/PublicId.js"
import { MaxSequence } from "./Api.js"
import { etagMatches } from "../http/Conditional.js"
import { EventLog } from "./EventLog.js"
import { EventStreamPath, responseScope } from "../http/FrontDoor.js"
import { withMiddlewaresOnly } from "../http/GroupContext.js"
import { EventPages, pageValidators } from "./EventPages.js"
import { LiveStreams } from "./LiveStream.js"

/** Last-Event-ID as sent back by an EventSource: the decimal sequence of the last event it received. */
const lastEventIdOf = (header: string | undefined): Effect.Effect<number | undefined, ValidationFailed> => {
  if (header === undefined || header.trim() === "") return Effect.succeed(undefined)
  const value = header.trim()
  const n = Number(value)
  if (/^\d{1,10}$/u.test(value) && n <= MaxSequence) return Effect.succeed(n)
  const detail = `must be an event sequence, an integer from 0 to ${MaxSequence}`
  return Effect.fail(new ValidationFailed({ detail: "The request failed validation.", errors: [new FieldError({ pointer: "/Last-Event-ID", detail })] }))
}

/** Built with its middlewares only: see http/GroupContext.ts. */
export const EventsHttpLive = Layer.unwrap(Effect.gen(function*() {
  const log = yield* EventLog
  const streams = yield* LiveStreams
  const pages = yield* EventPages
  return withMiddlewaresOnly(HttpApiBuilder.group(Api, "events", (handlers) =>
    // Both reads need trust:read, checked by ApiKeyAuth (the endpoints' RequiredScope).
    handlers
      // Sent from bytes encoded once per (page, head) through EventPage (events/EventPages.ts); 304 while the head stands.
      // If-None-Match is read off the request rather than declared, so the derived client's `events.list` needs no headers.
      .handle("list", ({ query, request }) => {
        const ifNoneMatch = request.headers["if-none-match"]
        return requirePublicId(query.public_id).pipe(
          Effect.flatMap((publicId) => pages.ref(publicId, query.after, query.limit)),
          Effect.flatMap((ref) =>
            etagMatches(ifNoneMatch, ref.etag)
              ? Effect.succeed(HttpServerResponse.empty({ status: 304, headers: pageValidators(ref.etag) }))
              : Effect.map(pages.body(ref), (page) => page.ok)
          )
        )
      })
      .handle("stream", ({ headers, query }) =>
        Effect.gen(function*() {
          const key = yield* Caller
          const publicId = yield* requirePublicId(query.public_id)
          const resumeFrom = yield* lastEventIdOf(headers["last-event-id"])
          // The slot lives as long as the response, not its body (which a client gone before the first byte never pulls).
          const body = yield* streams.open(key.key_id, publicId, resumeFrom ?? query.after ?? 0).pipe(Scope.provide(yield* responseScope))
          return HttpServerResponse.stream(body, {
            contentType: "text/event-stream",
            // Proxies must pass each message on at once, and nobody may cache a live stream.
            headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
          })
        }))
      .handle("keys", () => log.jwks)))
}))

/**
 * HEAD on the live stream: 405 (`Allow: GET`), before authentication, so it opens nothing and costs the key
 * nothing. Without it the router answers HEAD with the GET handler: a stream opened for a body never sent.
 * A router route (as /metrics), outside the HttpApi definition: an endpoint of its own would be a documented
 * operation that only ever refuses.
 */
export const EventStreamHeadLive = HttpRouter.use((router) =>
  router.addAll([HttpRouter.route("HEAD", EventStreamPath, methodNotAllowedAnswer("The event stream takes GET only: open it with GET.", "GET"))]))
