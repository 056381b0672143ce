import { Schema, SchemaTransformation } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { ApiKeyAuth, RequiredScope } from "../api/Auth.js"
import { DeterminationNotFound, InvalidPublicId, RateLimited, ValidationFailed } from "../domain/Problem.js"
import { EventJwks, EventPage } from "../domain/TrustEvent.js"
import { DefaultPageSize, MaxPageSize } from "./Paging.js"

export const MaxSequence = 2_147_483_647

/**
 * A query integer with one readable failure message (instead of one per parse step): plain decimal
 * digits (`0x10`, `1e3` or ` 7` are not page positions), then one check of the whole range, so a value
 * never reports two problems.
 */
export const QueryInt = (message: string, description: string, minimum: number, maximum: number) =>
  Schema.optionalKey(
    Schema.String.check(Schema.isPattern(/^-?\d{1,20}$/u, { message })).pipe(
      Schema.decodeTo(
        Schema.Number.check(Schema.makeFilter((n: number) => (Number.isSafeInteger(n) && n >= minimum && n <= maximum) || message)),
        SchemaTransformation.numberFromString
      )
    ).annotate({ description })
  )

const EventsQuery = {
  public_id: Schema.String.annotate({ description: "DET-V1-* or QUAL-V1-*" }),
  // Sequences are PostgreSQL integers: a larger `after` is refused here, not by the database.
  after: QueryInt(`must be an integer from 0 to ${MaxSequence}`, "Return events with a greater sequence (default 0: from the start)",
    0, MaxSequence),
  limit: QueryInt(`must be an integer between 1 and ${MaxPageSize}`, `Page size, default ${DefaultPageSize}, at most ${MaxPageSize}`,
    1, MaxPageSize)
}

export class EventsApi extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("list", "/events", {
      query: EventsQuery,
      success: EventPage,
      error: [InvalidPublicId, DeterminationNotFound, ValidationFailed]
    })
      .middleware(ApiKeyAuth)
      .annotate(RequiredScope, "trust:read")
      .annotate(OpenApi.Summary, "Signed event feed of a determination")
      .annotate(OpenApi.Description,
        "Events in ascending sequence after `after`. Each carries previousEventHash and eventHash " +
        "(SHA-256 of \"pv-event-v1\\n\" + JCS of the event without eventHash and signature) and an Ed25519 " +
        "signature over the raw hash bytes; keys are at /api/v1/events/keys. Follow `next_after` until it is null; " +
        "`head` is the chain's last event, the same head the trust document reports in integrity.event_head. " +
        "Each answer carries an ETag naming the head it was bounded by: send it back in If-None-Match for a 304 " +
        "while the chain has not moved.")
  )
  .add(
    HttpApiEndpoint.get("stream", "/events/stream", {
      query: { public_id: EventsQuery.public_id, after: EventsQuery.after },
      headers: {
        "last-event-id": Schema.optionalKey(Schema.String.annotate({
          description: "The id (sequence) of the last event received: resume after it (wins over `after`)"
        }))
      },
      success: HttpApiSchema.StreamUint8Array({ contentType: "text/event-stream" }),
      error: [InvalidPublicId, DeterminationNotFound, ValidationFailed, RateLimited]
    })
      .middleware(ApiKeyAuth)
      .annotate(RequiredScope, "trust:read")
      .annotate(OpenApi.Summary, "Live stream of a determination's events, Server-Sent Events")
      .annotate(OpenApi.Description,
        "Every stored event after `after` (or after the Last-Event-ID header, which wins), then each new event within a " +
        "second of its append on any instance. Each message is `id: <sequence>`, `event: pv.trust.event`, `data: <the event " +
        "JSON on one line>`; a comment line comes at least every 15 s. At most PV_MAX_STREAMS_PER_KEY (default 10) open " +
        "streams per key and instance (beyond: 429 rate-limited); opening one counts once against the key's limits. A " +
        "stopping instance ends its streams cleanly: reconnect with Last-Event-ID. Events are the same signed, chained " +
        "events as GET /events: verify them the same way.")
  )
  .add(
    HttpApiEndpoint.get("keys", "/events/keys", { success: EventJwks })
      .annotate(OpenApi.Summary, "Event-signing public keys (JWKS, no key needed)")
      .annotate(OpenApi.Description,
        "Every Ed25519 key any instance has signed events with, retired ones included. kid = first 16 hex of " +
        "SHA-256 of the raw public key. These are not credential-issuance keys.")
  )
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "Events") {}
