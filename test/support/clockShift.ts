import type { ShiftableClock } from "./ShiftableClock.js"

export interface ClockShift {
  /** Move the server's clock by `ms` (negative: back). */
  readonly by: (ms: number) => void
  /** Move the server's clock so that it reads `instantMs` now. */
  readonly to: (instantMs: number) => void
}

/**
 * Runs `body` with a server clock it may move, and undoes every move exactly in `finally`, whatever `body`
 * does or throws, so one failing test never leaves the next ones on a shifted clock.
 */
export const withShiftedClock = async <A>(clock: ShiftableClock, body: (shift: ClockShift) => Promise<A>): Promise<A> => {
  let moved = 0
  const by = (ms: number) => {
    clock.advance(ms)
    moved += ms
  }
  const to = (instantMs: number) => by(instantMs - clock.currentTimeMillisUnsafe())
  try {
    return await body({ by, to })
  } finally {
    clock.advance(-moved)
  }
}

/** Polls `probe` until `done` holds or `timeoutMs` of real time have passed; returns the last value seen. */
export const pollUntil = async <A>(
  probe: () => Promise<A>,
  done: (value: A) => boolean,
  options: { readonly timeoutMs: number; readonly intervalMs?: number }
): Promise<A> => {
  const deadline = Date.now() + options.timeoutMs
  let value = await probe()
  while (!done(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 50))
    value = await probe()
  }
  return value
}
