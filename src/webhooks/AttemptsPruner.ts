import { Duration, Effect, Layer } from "effect"
import { ChangeFeed } from "../events/ChangeFeed.js"
import { AttemptsKept } from "./Attempts.js"
import { WebhookAttemptsRepo } from "./AttemptsRepo.js"

/** How often the prune and the repair run (on every instance; both are safe to repeat). */
const PruneInterval = Duration.minutes(1)

/**
 * One round: keeps the newest `AttemptsKept` attempts of each subscription, and applies the redeliveries a
 * worker that died left waiting for an outcome it never recorded (waking every instance for them, as a
 * redelivery does). Safe on every instance at once (the prune takes an advisory lock, the repair is idempotent).
 */
export const pruneRound = Effect.gen(function*() {
  const repo = yield* WebhookAttemptsRepo
  const feed = yield* ChangeFeed
  const woken = new Set(yield* repo.applyStranded)
  for (const publicId of woken) yield* feed.notify(publicId)
  for (const publicId of woken) yield* feed.committed(publicId)
  return { redelivered: woken.size, pruned: yield* repo.prune(AttemptsKept) }
})

/** `pruneRound` once a minute for the life of the server. */
export const AttemptsPrunerLive = Layer.effectDiscard(
  Effect.gen(function*() {
    yield* pruneRound.pipe(
      // A failed round (database away) is logged and tried again at the next tick.
      Effect.catchCause((cause) => Effect.logWarning("webhook attempts prune failed; retrying", cause)),
      Effect.andThen(Effect.sleep(PruneInterval)),
      Effect.forever,
      Effect.forkScoped
    )
  })
).pipe(Layer.provide(WebhookAttemptsRepo.layer))
