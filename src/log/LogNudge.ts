import { Context, Duration, Effect, Layer, Queue } from "effect"
import { MetricsState } from "../observability/Metrics.js"

export interface LogNudgeShape {
  /** Entries are pending: integrate before the next tick. */
  readonly nudge: Effect.Effect<void>
  /** Until a nudge arrives or `ms` pass. */
  readonly wait: (ms: number) => Effect.Effect<void>
}

const makeLogNudge = Effect.gen(function*() {
  const queue = yield* Queue.sliding<void>(1)
  const { log } = yield* MetricsState
  return {
    // The integration-lag gauge (observability/Metrics.ts) measures from the first write not yet integrated.
    // Once per new receipt or event: no span (docs/ARCHITECTURE.md, the services rule).
    nudge: Effect.andThen(Effect.sync(log.entryQueued), Queue.offer(queue, undefined)).pipe(Effect.asVoid),
    wait: Effect.fn("LogNudge.wait")((ms: number) => Queue.take(queue).pipe(Effect.timeoutOption(Duration.millis(ms)), Effect.asVoid))
  } satisfies LogNudgeShape
})

/** Writers tell the integrator that entries are pending, so they are integrated before its next tick. */
export class LogNudge extends Context.Service<LogNudge, LogNudgeShape>()("pv/LogNudge", { make: makeLogNudge }) {
  static readonly layer = Layer.effect(this, makeLogNudge)
}
