import { OneOf } from "./Json.js"

export const FreshnessStates = ["CURRENT", "APPROACHING_STALE", "STALE", "EXPIRED"] as const
export const FreshnessState = OneOf("FreshnessState", FreshnessStates)
export type FreshnessState = typeof FreshnessState.Type

export const LifecycleStates = ["NOT_ISSUED", "ACTIVE", "SUSPENDED", "REVOKED", "EXPIRED", "SUPERSEDED"] as const
export const LifecycleState = OneOf("LifecycleState", LifecycleStates)
export type LifecycleState = typeof LifecycleState.Type

/**
 * docs/API.md §6.2, the one home of the freshness rule. With w = valid_until - as_of:
 * CURRENT before valid_until - 0.2w; APPROACHING_STALE until valid_until; STALE until valid_until + w;
 * EXPIRED after. Integer arithmetic (scaled by 5) so no boundary is blurred by floating point.
 */
export const freshnessAt = (
  nowMs: number,
  asOfMs: number,
  validUntilMs: number,
  lifecycle: LifecycleState
): FreshnessState => {
  if (lifecycle === "EXPIRED") return "EXPIRED"
  const w = validUntilMs - asOfMs
  if (5 * nowMs < 5 * validUntilMs - w) return "CURRENT"
  if (nowMs < validUntilMs) return "APPROACHING_STALE"
  if (nowMs < validUntilMs + w) return "STALE"
  return "EXPIRED"
}

/** The next instant at which `freshnessAt` changes its answer, or null once EXPIRED. */
export const nextFreshnessBoundary = (nowMs: number, asOfMs: number, validUntilMs: number): number | null => {
  const w = validUntilMs - asOfMs
  const approaching = Math.ceil((5 * validUntilMs - w) / 5)
  for (const boundary of [approaching, validUntilMs, validUntilMs + w]) {
    if (nowMs < boundary) return boundary
  }
  return null
}

/**
 * The states a determination enters as time passes after `as_of`, each with the instant it starts:
 * what the event feed announces as freshness.changed. States the rule skips (a window too short for
 * APPROACHING_STALE) are absent; lifecycle EXPIRED is EXPIRED from the start, so nothing is entered.
 */
export const freshnessTimeline = (
  asOfMs: number,
  validUntilMs: number,
  lifecycle: LifecycleState
): ReadonlyArray<{ readonly state: FreshnessState; readonly at: number }> => {
  const entries: Array<{ state: FreshnessState; at: number }> = []
  let state = freshnessAt(asOfMs, asOfMs, validUntilMs, lifecycle)
  for (let t = nextFreshnessBoundary(asOfMs, asOfMs, validUntilMs); t !== null; t = nextFreshnessBoundary(t, asOfMs, validUntilMs)) {
    const next = freshnessAt(t, asOfMs, validUntilMs, lifecycle)
    if (next !== state) entries.push({ state: next, at: t })
    state = next
  }
  return entries
}
