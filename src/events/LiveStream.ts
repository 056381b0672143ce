import * as Sse from "effect/encoding/Sse"
import { Context, Duration, Effect, Layer, type Scope, Stream } from "effect"
import { type DeterminationNotFound, RateLimited } from "../domain/Problem.js"
import type { PublicId } from "../domain/PublicId.js"
import type { TrustEvent } from "../domain/TrustEvent.js"
import { FrontDoor } from "../http/FrontDoor.js"
import { MetricsState } from "../observability/Metrics.js"
import { AppConfig } from "../platform/Config.js"
import { ChangeFeed } from "./ChangeFeed.js"
import { EventLog } from "./EventLog.js"

/** The SSE event name of every message. */
export const StreamEventName = "pv.trust.event"

/** Events read per page while catching up: a long backlog is sent in bounded steps. */
const BacklogPageSize = 100

/** One event as a Server-Sent Events message: its sequence as the id (what Last-Event-ID resumes from), the JSON on one line. */
export const sseMessageOf = (event: TrustEvent): string =>
  Sse.encoder.write({ _tag: "Event", id: String(event.sequence), event: StreamEventName, data: JSON.stringify(event) })

export const HeartbeatComment = ": keep-alive\n\n"

export interface LiveStreamsShape {
  /**
   * The stream of `publicId`'s events after `after`: the stored ones first, then each new one as it is
   * appended on any instance (the change feed), with a comment line whenever nothing else was sent for the
   * heartbeat interval; it ends when this instance starts to stop. Refused with 429 when the key already
   * has its maximum of open streams here. Opening it is the one request counted against the key's limits.
   * The slot it takes is held by the scope it is opened in (the response's: http/FrontDoor.ts, `responseScope`),
   * never by the body, which a response that is never sent (a client gone before the first byte) never pulls.
   */
  readonly open: (
    keyId: string,
    publicId: PublicId,
    after: number
  ) => Effect.Effect<Stream.Stream<Uint8Array>, DeterminationNotFound | RateLimited, Scope.Scope>
}

const make = Effect.gen(function*() {
  const log = yield* EventLog
  const feed = yield* ChangeFeed
  const frontDoor = yield* FrontDoor
  const config = yield* AppConfig
  const streamState = (yield* MetricsState).streams
  const openByKey = new Map<string, number>()
  const encoder = new TextEncoder()
  const heartbeat = Duration.millis(config.streamHeartbeatMs)

  const acquire = (keyId: string) =>
    Effect.suspend(() => {
      const held = openByKey.get(keyId) ?? 0
      if (held >= config.maxStreamsPerKey) {
        return Effect.fail(new RateLimited({
          detail: `This key may hold ${config.maxStreamsPerKey} open event streams at once; close one first.`,
          retry_after: 5
        }))
      }
      openByKey.set(keyId, held + 1)
      streamState.open += 1
      return Effect.void
    })

  const release = (keyId: string) =>
    Effect.sync(() => {
      const left = (openByKey.get(keyId) ?? 1) - 1
      if (left <= 0) openByKey.delete(keyId)
      else openByKey.set(keyId, left)
      streamState.open -= 1
    })

  const open = Effect.fn("LiveStreams.open")(function*(keyId: string, publicId: PublicId, after: number) {
    // An unknown determination is a 404 before anything is streamed.
    yield* log.head(publicId)
    yield* Effect.acquireRelease(acquire(keyId), () => release(keyId))

    const events = Stream.unwrap(Effect.gen(function*() {
      // Watch first, then read: a change committed while the backlog is read still wakes the loop.
      const changes = yield* feed.watch((id) => id === publicId)
      let cursor = after
      /**
       * The next messages: stored events after the cursor or, caught up, a wait for the next change or one
       * heartbeat interval, whichever comes first, then a read again: a notice the feed missed (its
       * connection to PostgreSQL was down) costs at most one interval, and a quiet stream one cheap read each.
       */
      const next = Effect.gen(function*() {
        // Not interrupted when the client leaves: a read takes milliseconds, while an interrupted statement costs
        // the pool its connection (the embedded database never answers the cancel: the driver waits 5 s).
        const page = yield* Effect.uninterruptible(log.page(publicId, { after: cursor, limit: BacklogPageSize }))
        if (page.events.length === 0) {
          yield* Effect.raceFirst(changes.next, Effect.sleep(heartbeat))
          return []
        }
        cursor = page.events[page.events.length - 1]!.sequence
        return page.events.map(sseMessageOf)
      })
      return Stream.fromEffectRepeat(next).pipe(Stream.flattenIterable)
    }))
    const heartbeats = Stream.tick(config.streamHeartbeatMs).pipe(Stream.drop(1), Stream.map((): string => HeartbeatComment))
    const body = Stream.concat(Stream.succeed(`: ${publicId} after ${after}\n\n`), Stream.merge(events, heartbeats)).pipe(
      // A drain (SIGTERM) ends every stream cleanly; the client resumes elsewhere with Last-Event-ID.
      Stream.interruptWhen(frontDoor.stopping),
      // A database error mid-stream ends it too: the client reconnects and resumes with Last-Event-ID.
      Stream.catchCause(() => Stream.empty),
      Stream.map((text) => encoder.encode(text))
    )
    return body
  })

  return { open } satisfies LiveStreamsShape
})

/** Live event streams (GET /api/v1/events/stream) of this instance, with the per-key cap. */
export class LiveStreams extends Context.Service<LiveStreams, LiveStreamsShape>()("pv/LiveStreams") {
  static readonly layer = Layer.effect(LiveStreams, make)
}
