/**
 * How many requests one process works on at once. Fixed when the operator pins it (PV_MAX_IN_FLIGHT);
 * otherwise adaptive, after the gradient limit of Netflix's concurrency-limits (Gradient2): the limit
 * follows the ratio of the long-term latency (what this process does unloaded: the fastest windows,
 * rising only slowly) to the latency of the last window. While requests take as long as usual the limit grows by about its square root per
 * window (room to find more capacity); when they take longer (they queue: on the event loop, for a
 * database connection) it shrinks in proportion, so the requests it admits keep their latency and the
 * rest get a fast 503 instead of joining a queue. Pure: the front door feeds it samples.
 */
export interface ConcurrencyLimit {
  /** Requests admitted at once right now. */
  readonly current: () => number
  /** One admitted request ended after `rttMs`; `inFlight` were in flight when it ended (itself included). */
  readonly sample: (rttMs: number, inFlight: number) => void
}

export interface GradientOptions {
  readonly initial: number
  readonly min: number
  readonly max: number
  /** How much slower than the long-term latency the last window may be before the limit shrinks. */
  readonly tolerance: number
  /** Samples per window: the limit moves once per window, on the window's mean latency. */
  readonly windowSamples: number
  /**
   * How slowly the long-term latency rises toward a slower window (it falls to a faster one at once): a
   * sustained overload must not become the new normal before the limit has shrunk.
   */
  readonly longWindows: number
  /** How far each update moves toward the new estimate (0–1). */
  readonly smoothing: number
}

export const DefaultGradient: GradientOptions = {
  initial: 64,
  min: 8,
  max: 1_024,
  tolerance: 2,
  windowSamples: 50,
  longWindows: 2_000,
  smoothing: 0.2
}

export const fixedLimit = (limit: number): ConcurrencyLimit => ({ current: () => limit, sample: () => {} })

export const gradientLimit = (options: GradientOptions = DefaultGradient): ConcurrencyLimit => {
  let limit = options.initial
  let admitted = Math.floor(limit)
  let longRtt = 0
  let windowSum = 0
  let windowCount = 0
  let windowMaxInFlight = 0

  const update = (shortRtt: number) => {
    // The unloaded latency: down at once to any faster window, up only slowly (a changed workload, a
    // slower database), so queueing shows as a slower window and not as a new baseline.
    if (longRtt === 0 || shortRtt < longRtt) longRtt = shortRtt
    else longRtt += (shortRtt - longRtt) / options.longWindows
    // Only a window that used at least half the limit says anything about it: an idle process's fast
    // answers must not grow the limit without bound.
    if (windowMaxInFlight * 2 < limit) return
    const gradient = Math.max(0.5, Math.min(1, (options.tolerance * longRtt) / shortRtt))
    const estimate = limit * gradient + Math.sqrt(limit)
    limit = Math.min(options.max, Math.max(options.min, limit * (1 - options.smoothing) + estimate * options.smoothing))
    admitted = Math.floor(limit)
  }

  return {
    current: () => admitted,
    sample: (rttMs, inFlight) => {
      if (!(rttMs >= 0) || !Number.isFinite(rttMs)) return
      windowSum += rttMs
      windowCount += 1
      if (inFlight > windowMaxInFlight) windowMaxInFlight = inFlight
      if (windowCount < options.windowSamples) return
      update(Math.max(windowSum / windowCount, 0.001))
      windowSum = 0
      windowCount = 0
      windowMaxInFlight = 0
    }
  }
}
