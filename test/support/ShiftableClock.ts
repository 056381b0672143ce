import { Clock, Duration, Effect } from "effect"

/**
 * Real time plus an offset the test moves forward. Services read Effect's Clock, so a server built
 * with this clock sees time jump while its timers, sockets and database keep running on real time.
 */
export class ShiftableClock implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  private readonly base = Clock.make()
  private offsetMs = 0

  advance(ms: number): void {
    this.offsetMs += ms
  }

  /** Jump so that `now` becomes exactly `instantMs`. */
  setTo(instantMs: number): void {
    this.offsetMs = instantMs - Date.now()
  }

  unsafeCurrentTimeMillis(): number {
    return this.base.unsafeCurrentTimeMillis() + this.offsetMs
  }

  unsafeCurrentTimeNanos(): bigint {
    return this.base.unsafeCurrentTimeNanos() + BigInt(this.offsetMs) * 1_000_000n
  }

  currentTimeMillis: Effect.Effect<number> = Effect.sync(() => this.unsafeCurrentTimeMillis())
  currentTimeNanos: Effect.Effect<bigint> = Effect.sync(() => this.unsafeCurrentTimeNanos())

  sleep(duration: Duration.DurationInput): Effect.Effect<void> {
    return this.base.sleep(Duration.decode(duration))
  }
}
