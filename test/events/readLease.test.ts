import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  fenceOf,
  fencePayload,
  initialLease,
  leaseMarginMs,
  leaseMs,
  type LeaseState,
  onHeard,
  onListenLost,
  onRenewed,
  servableUntil
} from "../../src/events/ReadLease.js"

/** A reader's history: renews (sent, then their fence returned), fences heard in order, LISTEN losses. */
type Step =
  | { readonly kind: "renew"; readonly atMs: number }
  | { readonly kind: "hear"; readonly upTo: number }
  | { readonly kind: "lost" }

const steps: fc.Arbitrary<Array<Step>> = fc.array(
  fc.oneof(
    fc.record({ kind: fc.constant("renew" as const), atMs: fc.integer({ min: 0, max: 100_000 }) }),
    fc.record({ kind: fc.constant("hear" as const), upTo: fc.integer({ min: 0, max: 40 }) }),
    fc.record({ kind: fc.constant("lost" as const) })
  ),
  { maxLength: 60 }
)

describe("read leases (events/ReadLease.ts)", () => {
  it("a reader stops serving before the database's lease ends, whenever the renew ran after it was sent", () => {
    fc.assert(fc.property(fc.double({ min: 0, max: 1e9, noNaN: true }), fc.double({ min: 0, max: 1e6, noNaN: true }), (sentAt, delay) => {
      expect(servableUntil(sentAt)).toBeLessThanOrEqual(sentAt + delay + leaseMs - leaseMarginMs)
      expect(servableUntil(sentAt)).toBeLessThan(sentAt + delay + leaseMs)
    }))
  })

  it("serving is extended only by a renew whose fence was heard, never past its servable end; a loss ends it", () => {
    fc.assert(fc.property(steps, (history) => {
      let state: LeaseState = initialLease
      let nextFence = 0
      let heardUpTo = -1
      /** Renews returned since the last loss: fence → sent at. */
      const renews: Array<{ fence: number; atMs: number }> = []
      for (const step of history) {
        if (step.kind === "renew") {
          const fence = nextFence++
          state = onRenewed(state, BigInt(fence), step.atMs)
          renews.push({ fence, atMs: step.atMs })
        } else if (step.kind === "hear") {
          // Fences arrive in order; a reader hears only fences already taken.
          const upTo = Math.min(step.upTo, nextFence - 1)
          if (upTo > heardUpTo) {
            heardUpTo = upTo
            state = onHeard(state, BigInt(upTo))
          }
        } else {
          state = onListenLost(state)
          renews.length = 0
          expect(state.servingUntilMs).toBe(0)
        }
        // The bound: the latest servable end among renews (since the last loss) whose fence was heard.
        const proven = renews.filter((r) => r.fence <= heardUpTo).map((r) => servableUntil(r.atMs))
        const bound = proven.length === 0 ? 0 : Math.max(...proven)
        expect(state.servingUntilMs).toBeLessThanOrEqual(bound)
        expect(state.heard).toBe(BigInt(heardUpTo))
      }
    }))
  })

  it("a renew's serving starts once its fence is heard, in either order", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 1e6 }), fc.bigInt({ min: 0n, max: 1n << 40n }), fc.boolean(), (sentAt, fence, heardFirst) => {
      const state = heardFirst
        ? onRenewed(onHeard(initialLease, fence), fence, sentAt)
        : onHeard(onRenewed(initialLease, fence, sentAt), fence)
      expect(state.servingUntilMs).toBe(servableUntil(sentAt))
      expect(state.pending).toBeUndefined()
      expect(onRenewed(initialLease, fence, sentAt).servingUntilMs, "not before it is heard").toBe(0)
    }))
  })

  it("a fence payload round-trips and is never a public id", () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: (1n << 63n) - 1n }), (fence) => {
      expect(fenceOf(fencePayload(fence))).toBe(fence)
    }))
    fc.assert(fc.property(fc.stringMatching(/^[A-Z][A-Z0-9-]{0,40}$/), (publicId) => {
      expect(fenceOf(publicId)).toBeUndefined()
    }))
    expect(fenceOf("#fence:")).toBeUndefined()
    expect(fenceOf("#fence:12a")).toBeUndefined()
  })
})
