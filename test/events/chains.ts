import type { EventPayload, EventType, TrustEvent } from "../../src/domain/TrustEvent.js"
import { sealEvent } from "../../src/domain/EventChain.js"
import { privateKeyFromSeed, signerFromPrivateKey, testSigningSeed, type SignerShape } from "../../src/events/Signer.js"

export const testSigner: SignerShape = signerFromPrivateKey(privateKeyFromSeed(testSigningSeed), "seed")
export const otherSigner: SignerShape = signerFromPrivateKey(privateKeyFromSeed(Buffer.alloc(32, 9)), "seed")
export const testJwks = { keys: [testSigner.jwk] }

export interface ChainItem {
  readonly type: EventType
  readonly payload: EventPayload
  /** Which key seals this event; the test key unless given. */
  readonly signer?: SignerShape
}

/** A chain built the way EventLog builds one: each event sealed over the previous one's hash. */
export const buildChain = (publicId: string, items: ReadonlyArray<ChainItem>, startMs = Date.UTC(2025, 0, 1)): Array<TrustEvent> => {
  const events: Array<TrustEvent> = []
  for (const [i, item] of items.entries()) {
    events.push(sealEvent({
      sequence: i + 1,
      event_id: `evt_${String(i).padStart(26, "0")}`,
      public_id: publicId,
      type: item.type,
      occurred_at: new Date(startMs + i * 1000).toISOString(),
      payload: item.payload,
      previousEventHash: events[i - 1]?.eventHash ?? null
    }, item.signer ?? testSigner))
  }
  return events
}

export const headOf = (events: ReadonlyArray<TrustEvent>) => {
  const last = events[events.length - 1]
  return { sequence: last?.sequence ?? 0, eventHash: last?.eventHash ?? null }
}
