import { Duration, Effect, Layer } from "effect"
import { AttemptsKept } from "./Attempts.js"
import { WebhookAttemptsRepo } from "./AttemptsRepo.js"

/** How often the prune runs (on every instance; the statement is idempotent). */
const PruneInterval = Duration.minutes(1)

/**
 * Keeps the newest `AttemptsKept` attempts of each subscription: a loop forked for the life of the server,
 * on every instance (the delete is idempotent, so instances running it at once only repeat each other's
 * work); a failed round (database away) is logged and tried again at the next tick.
 */
export const AttemptsPrunerLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const repo = yield* WebhookAttemptsRepo
    yield* repo.prune(AttemptsKept).pipe(
      Effect.catchCause((cause) => Effect.logWarning("webhook attempts prune failed; retrying", cause)),
      Effect.andThen(Effect.sleep(PruneInterval)),
      Effect.forever,
      Effect.forkScoped
    )
  })
).pipe(Layer.provide(WebhookAttemptsRepo.layer))
