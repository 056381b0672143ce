import { Context, Duration, Effect, Layer, Queue } from "effect"
import { logEntryQueued } from "../observability/Metrics.js"

const makeLogNudge = Effect.map(Queue.sliding<void>(1), (queue) => ({
  // The integration-lag gauge (observability/Metrics.ts) measures from the first write not yet integrated.
  nudge: Effect.andThen(Effect.sync(logEntryQueued), Queue.offer(queue, undefined)).pipe(Effect.asVoid),
  /** Until a nudge arrives or `ms` pass. */
  wait: (ms: number) => Queue.take(queue).pipe(Effect.timeoutOption(Duration.millis(ms)), Effect.asVoid)
}))

/** Writers tell the integrator that entries are pending, so they are integrated before its next tick. */
export class LogNudge extends Context.Service<LogNudge, Effect.Success<typeof makeLogNudge>>()("pv/LogNudge", { make: makeLogNudge }) {
  static readonly layer = Layer.effect(this, makeLogNudge)
}
