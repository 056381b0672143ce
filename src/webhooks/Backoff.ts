/**
 * How long a delivery waits before its next attempt: exponential from 1 s, doubling per consecutive
 * failure, capped at 5 minutes, with ±25 % jitter so that the subscriptions a receiver's outage failed
 * together do not retry together. The jitter is clamped at the cap, so the delay never exceeds
 * 5 minutes and, once the base reaches the cap, never shrinks as failures grow.
 */

export const MinRetryDelayMs = 750
export const MaxRetryDelayMs = 300_000
const FirstRetryMs = 1_000

/**
 * The delay after `failures` (≥ 1) consecutive failed attempts, given `random` in [0, 1):
 * base = min(300 000, 1 000 · 2^(failures − 1)); delay = min(300 000, round(base · (0.75 + 0.5 · random))).
 * Always within [750, 300 000] ms; a failures count below 1 or NaN counts as 1.
 */
export const retryDelayMs = (failures: number, random: number): number => {
  const n = failures >= 1 ? Math.floor(failures) : 1
  const r = Number.isFinite(random) ? Math.min(Math.max(random, 0), 1) : 0.5
  // 2^19 s already exceeds the cap: the exponent is bounded so the arithmetic never overflows.
  const base = Math.min(MaxRetryDelayMs, FirstRetryMs * 2 ** Math.min(n - 1, 20))
  return Math.min(MaxRetryDelayMs, Math.max(MinRetryDelayMs, Math.round(base * (0.75 + 0.5 * r))))
}
