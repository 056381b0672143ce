import type { MachineTrustResponse } from "../domain/MachineTrust.js"
import type { RelianceReceipt } from "../domain/Receipt.js"

/** One field of the trust state that moved since the compared snapshot. */
export interface TrustChange {
  readonly field: string
  readonly previous: string
  readonly current: string
}

export interface TrustComparison {
  readonly changed: boolean
  readonly current_trust_state_digest: string
  readonly compared_trust_state_digest: string
  readonly changes: ReadonlyArray<TrustChange>
}

/** The trust-state fields a receipt records, read from the current document under the receipt's names. */
const receiptFields = (
  document: MachineTrustResponse
): ReadonlyArray<readonly [keyof RelianceReceipt & string, string]> => [
  ["determination_id", document.determination.determination_id],
  ["determination_digest", document.determination.determination_digest],
  ["tier", document.determination.tier],
  ["lifecycle_state", document.lifecycle.state],
  ["freshness_state", document.freshness.state],
  ["policy_version", document.policy.policy_version],
  ["policy_digest", document.policy.policy_digest],
  ["trust_state_digest", document.trust_state_digest]
]

/**
 * `changed` is exactly "the trust_state_digest moved"; `changes` names what moved, as far as the compared
 * snapshot lets us see. A bare digest only tells us the digest itself; a receipt also names tier,
 * lifecycle, freshness, determination and policy.
 */
export const compareWithDigest = (comparedDigest: string, current: MachineTrustResponse): TrustComparison => ({
  changed: comparedDigest !== current.trust_state_digest,
  current_trust_state_digest: current.trust_state_digest,
  compared_trust_state_digest: comparedDigest,
  changes: comparedDigest === current.trust_state_digest
    ? []
    : [{ field: "trust_state_digest", previous: comparedDigest, current: current.trust_state_digest }]
})

export const compareWithReceipt = (receipt: RelianceReceipt, current: MachineTrustResponse): TrustComparison => ({
  changed: receipt.trust_state_digest !== current.trust_state_digest,
  current_trust_state_digest: current.trust_state_digest,
  compared_trust_state_digest: receipt.trust_state_digest,
  changes: receiptFields(current)
    .filter(([field, value]) => receipt[field] !== value)
    .map(([field, value]) => ({ field, previous: String(receipt[field]), current: value }))
})
