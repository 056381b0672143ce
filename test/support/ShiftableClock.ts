import { Clock, Duration, Effect } from "effect"

/**
 * Real time plus an offset the test moves forward. Services read Effect's Clock, so a server built
 * with this clock sees time jump while its timers, sockets and database keep running on real time.
 * Only wall-clock time shifts: monotonic time (durations, timeouts) stays the live clock's.
 */
export class ShiftableClock implements Clock.Clock {
  private readonly base: Clock.Clock = Clock.Clock.defaultValue()
  private offsetMs = 0

  advance(ms: number): void {
    this.offsetMs += ms
  }

  /** Jump so that `now` becomes exactly `instantMs`. */
  setTo(instantMs: number): void {
    this.offsetMs = instantMs - Date.now()
  }

  currentTimeMillisUnsafe(): number {
    return this.base.currentTimeMillisUnsafe() + this.offsetMs
  }

  currentTimeNanosUnsafe(): bigint {
    return this.base.currentTimeNanosUnsafe() + BigInt(this.offsetMs) * 1_000_000n
  }

  monotonicTimeNanosUnsafe(): bigint {
    return this.base.monotonicTimeNanosUnsafe()
  }

  readonly currentTimeMillis: Effect.Effect<number> = Effect.sync(() => this.currentTimeMillisUnsafe())
  readonly currentTimeNanos: Effect.Effect<bigint> = Effect.sync(() => this.currentTimeNanosUnsafe())
  readonly monotonicTimeNanos: Effect.Effect<bigint> = Effect.sync(() => this.monotonicTimeNanosUnsafe())

  sleep(duration: Duration.Duration): Effect.Effect<void> {
    return this.base.sleep(duration)
  }
}
