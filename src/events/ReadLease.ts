/**
 * Read your writes across instances (pure rules; events/ChangeFeed.ts runs them on PostgreSQL). Every process
 * that caches trust documents holds a lease row (reader id, acked fence, lease_until) and serves from its
 * cache only while its own lease is surely valid; a write, once committed, takes a fence and waits until
 * every leased reader acked it (it heard every notification committed before) or at most one lease length.
 */

/** A renew sets `lease_until = now() + leaseMs` in the database. */
export const leaseMs = 3_000
/** How often a healthy reader renews. */
export const renewEveryMs = 1_000
/** Kept off the local end of a lease: clock-rate differences and scheduling between processes. */
export const leaseMarginMs = 500

/** The notification payload of a fence: distinct from every public id. */
export const fencePrefix = "#fence:"
export const fencePayload = (fence: bigint | number | string): string => `${fencePrefix}${fence}`
/** The fence a payload carries, or undefined when it names a changed determination. */
export const fenceOf = (payload: string): bigint | undefined => {
  if (!payload.startsWith(fencePrefix)) return undefined
  const digits = payload.slice(fencePrefix.length)
  return /^[0-9]{1,19}$/.test(digits) ? BigInt(digits) : undefined
}

/**
 * Until when (monotonic ms) a reader may serve from its cache after it HEARD, on its LISTEN connection, the
 * fence of a renew it SENT at `sentAtMs`. The database set lease_until = now() + leaseMs with its now() later
 * than the send, so this ends before the lease does, by the margin at least.
 */
export const servableUntil = (sentAtMs: number, lease: number = leaseMs, margin: number = leaseMarginMs): number =>
  sentAtMs + lease - margin

/**
 * A reader's local state: the highest fence heard, the renew whose fence it still waits for, and until when
 * it may serve. Hearing a renew's fence (or any later one: notifications arrive in commit order) proves the
 * LISTEN connection delivered everything committed before that renew was sent.
 */
export interface LeaseState {
  readonly heard: bigint
  readonly pending: { readonly fence: bigint; readonly sentAtMs: number } | undefined
  readonly servingUntilMs: number
}

export const initialLease: LeaseState = { heard: -1n, pending: undefined, servingUntilMs: 0 }

/** A fence heard on the LISTEN connection. */
export const onHeard = (state: LeaseState, fence: bigint): LeaseState => {
  const heard = fence > state.heard ? fence : state.heard
  if (state.pending !== undefined && heard >= state.pending.fence) {
    return { heard, pending: undefined, servingUntilMs: Math.max(state.servingUntilMs, servableUntil(state.pending.sentAtMs)) }
  }
  return { ...state, heard }
}

/** A renew sent at `sentAtMs` returned its fence (its notification may already have been heard). */
export const onRenewed = (state: LeaseState, fence: bigint, sentAtMs: number): LeaseState =>
  state.heard >= fence
    ? { ...state, pending: undefined, servingUntilMs: Math.max(state.servingUntilMs, servableUntil(sentAtMs)) }
    : { ...state, pending: { fence, sentAtMs } }

/** The LISTEN connection is lost: serve nothing from the cache until a renew's fence is heard again. */
export const onListenLost = (state: LeaseState): LeaseState => ({ ...state, pending: undefined, servingUntilMs: 0 })
