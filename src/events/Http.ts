import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Caller } from "../access/Auth.js"
import { Api } from "../api/Api.js"
import { FieldError, ValidationFailed } from "../domain/Problem.js"
import { requirePublicId } from "../domain/PublicId.js"
import { MaxSequence } from "./Api.js"
import { etagMatches } from "../trust/Http.js"
import { EventLog } from "./EventLog.js"
import { EventPages } from "./EventPages.js"
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

export const EventsHttpLive = HttpApiBuilder.group(Api, "events", (handlers) =>
  Effect.gen(function*() {
    const log = yield* EventLog
    const streams = yield* LiveStreams
    const pages = yield* EventPages
    // Both reads need trust:read, checked by ApiKeyAuth (the endpoints' RequiredScope).
    return handlers
      // Sent from bytes encoded once per (page, head) through EventPage (events/EventPages.ts); 304 while the head stands.
      // If-None-Match is read off the request rather than declared, so the derived client's `events.list` needs no headers.
      .handle("list", ({ query, request }) =>
        Effect.gen(function*() {
          const publicId = yield* requirePublicId(query.public_id)
          const ref = yield* pages.ref(publicId, query.after, query.limit)
          const validators = { etag: ref.etag, "cache-control": "no-cache" }
          if (etagMatches(request.headers["if-none-match"], ref.etag)) return HttpServerResponse.empty({ status: 304, headers: validators })
          const page = yield* pages.body(ref)
          return HttpServerResponse.text(page.json, { contentType: "application/json", headers: validators })
        }))
      .handle("stream", ({ headers, query }) =>
        Effect.gen(function*() {
          const key = yield* Caller
          const publicId = yield* requirePublicId(query.public_id)
          const resumeFrom = yield* lastEventIdOf(headers["last-event-id"])
          const body = yield* streams.open(key.key_id, publicId, resumeFrom ?? query.after ?? 0)
          return HttpServerResponse.stream(body, {
            contentType: "text/event-stream",
            // Proxies must pass each message on at once, and nobody may cache a live stream.
            headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
          })
        }))
      .handle("keys", () => log.jwks)
  }))
