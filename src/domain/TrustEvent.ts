import { Schema } from "effect"
import { JsonObject } from "./Json.js"

/** docs/API.md §10.2: the four kinds of change a determination's chain records. */
export const EventTypes = ["determination.recorded", "determination.updated", "lifecycle.changed", "freshness.changed"] as const
export const EventType = Schema.Literals(EventTypes).annotate({ identifier: "EventType" })
export type EventType = typeof EventType.Type

export const EventSignature = Schema.Struct({
  alg: Schema.Literal("Ed25519"),
  kid: Schema.String.annotate({ description: "Key id: first 16 hex of SHA-256 of the raw 32-byte public key" }),
  sig: Schema.String.annotate({ description: "base64url (no padding) Ed25519 signature over the 32 raw bytes of eventHash" })
}).annotate({ identifier: "EventSignature" })

/** One signed, hash-chained event of a determination's feed. */
export const TrustEvent = Schema.Struct({
  sequence: Schema.Int,
  event_id: Schema.String,
  public_id: Schema.String,
  type: EventType,
  occurred_at: Schema.String,
  payload: JsonObject,
  previousEventHash: Schema.NullOr(Schema.String),
  eventHash: Schema.String.annotate({
    description: "SHA-256 hex of UTF-8 \"pv-event-v1\\n\" + JCS(event without eventHash and signature)"
  }),
  signature: EventSignature
}).annotate({ identifier: "TrustEvent" })
export type TrustEvent = typeof TrustEvent.Type
export type EventPayload = TrustEvent["payload"]

/** The event without its hash and signature: exactly what the hash covers. */
export type UnsignedEvent = Omit<TrustEvent, "eventHash" | "signature">

export const EventHeadSchema = Schema.Struct({
  sequence: Schema.Int,
  eventHash: Schema.NullOr(Schema.String)
}).annotate({ identifier: "EventHead" })

export const EventPage = Schema.Struct({
  public_id: Schema.String,
  events: Schema.Array(TrustEvent),
  next_after: Schema.NullOr(Schema.Int).annotate({ description: "Pass as `after` for the next page; null at the head" }),
  head: EventHeadSchema
}).annotate({ identifier: "EventPage" })
export type EventPage = typeof EventPage.Type

export const EventJwk = Schema.Struct({
  kty: Schema.Literal("OKP"),
  crv: Schema.Literal("Ed25519"),
  x: Schema.String,
  kid: Schema.String,
  use: Schema.Literal("sig"),
  alg: Schema.Literal("Ed25519")
}).annotate({ identifier: "EventJwk" })
export type EventJwk = typeof EventJwk.Type

export const EventJwks = Schema.Struct({ keys: Schema.Array(EventJwk) }).annotate({ identifier: "EventJwks" })
export type EventJwks = typeof EventJwks.Type
