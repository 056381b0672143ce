import { type Receiver } from "../support/receiver.js"
import { allScopes, eventChain, provisionKey } from "./service.js"
import { answer, pollUntil } from "./wire.js"

/**
 * What the webhook fault files (webhooks*.test.ts) share: the server's webhook settings for loopback
 * receivers, subscribing, and the per-subscription order check of what a receiver got against the chain.
 */

/** Loopback receivers need both development allowances; a short attempt time-out keeps the lease (time-out + 10 s) short. */
export const webhookEnv = (timeoutMs = 1_000, extra: Record<string, string> = {}): Record<string, string> => ({
  PV_WEBHOOK_ALLOW_HTTP: "true",
  PV_WEBHOOK_ALLOW_PRIVATE: "true",
  PV_WEBHOOK_TIMEOUT_MS: String(timeoutMs),
  ...extra
})

/**
 * PV_WEBHOOK_LEASE_MARGIN_MS of the kill -9 cases: a killed process's subscriptions are taken up when its leases
 * (time-out + margin; 10 s of margin by default) run out, which those cases wait for. One process at a time and
 * no database fault there, so no acknowledgement is retried under a lease: 3 s is ample.
 */
export const killLeaseMarginMs = 3_000

/** Exit after SIGTERM is due within the grace; this much more covers process teardown on a loaded machine (as drain.test.ts). */
export const exitMarginMs = 2_000

export const subscriberKey = (baseUrl: string) => provisionKey(baseUrl, [...allScopes, "subscription:write"])

export const subscribe = async (baseUrl: string, key: string, publicId: string, url: string): Promise<{ subscription_id: string; after: number }> => {
  const reply = await answer(baseUrl, "POST", "/api/v1/subscriptions", { bearer: key, body: { public_id: publicId, webhook_url: url } })
  if (reply.status !== 201) throw new Error(`subscription to ${url}: ${reply.status} ${reply.text}`)
  return reply.body
}

export interface Delivery {
  readonly sequence: number
  readonly eventId: string
  readonly webhookId: string
  readonly at: number
}

/** What the receiver got on `path`, in arrival order. */
export const deliveriesTo = (receiver: Receiver, path: string): Array<Delivery> =>
  receiver.received.filter((r) => r.path === path).map((r) => {
    const event = JSON.parse(r.body).event
    return { sequence: event.sequence, eventId: event.event_id, webhookId: String(r.headers["webhook-id"]), at: r.at }
  })

/** The highest sequence delivered to `path` so far (`after` when nothing was). */
export const deliveredThrough = (receiver: Receiver, path: string, after: number) =>
  deliveriesTo(receiver, path).reduce((max, d) => Math.max(max, d.sequence), after)

/**
 * One subscription's deliveries against its chain (`eventIds[s]` is the stored event_id of sequence s):
 * the first sightings are after+1, after+2, …, through with no gap; anything else is a repeat of the
 * latest event seen (the one possibly in flight), carrying the event's own id as webhook-id like the first.
 */
export const orderCheck = (deliveries: ReadonlyArray<Delivery>, after: number, through: number, eventIds: ReadonlyMap<number, string>) => {
  const problems: Array<string> = []
  const repeats: Array<{ delivery: Delivery; first: Delivery }> = []
  const firsts = new Map<number, Delivery>()
  let last = after
  for (const d of deliveries) {
    if (d.webhookId !== eventIds.get(d.sequence) || d.eventId !== eventIds.get(d.sequence)) {
      problems.push(`sequence ${d.sequence}: webhook-id ${d.webhookId}, body event_id ${d.eventId}, stored ${eventIds.get(d.sequence)}`)
    }
    if (d.sequence === last + 1) {
      last = d.sequence
      firsts.set(d.sequence, d)
    } else if (d.sequence === last && last > after) {
      repeats.push({ delivery: d, first: firsts.get(last)! })
    } else {
      problems.push(`sequence ${d.sequence} arrived after ${last}`)
    }
  }
  if (last !== through) problems.push(`first sightings end at ${last}, the chain at ${through}`)
  return { problems, repeats }
}

/** Stored event ids by sequence, and the head. */
export const chainIds = async (baseUrl: string, key: string, publicId: string) => {
  const { events, head } = await eventChain(baseUrl, key, publicId)
  return { ids: new Map<number, string>(events.map((e) => [e.sequence, e.event_id])), head: head.sequence }
}

/** Waits until every path has been delivered `through`; the message names the laggards. */
export const untilDelivered = async (receiver: Receiver, paths: ReadonlyArray<string>, after: number, through: number, timeoutMs: number) => {
  await pollUntil(`every subscription delivered through ${through}`, timeoutMs, async () => {
    const behind = paths.filter((p) => deliveredThrough(receiver, p, after) < through)
    if (behind.length === 0) return true
    throw new Error(`behind: ${behind.map((p) => `${p} at ${deliveredThrough(receiver, p, after)}`).join(", ")}`)
  }, 50)
}

export const metricValue = (text: string, outcome: string): number => {
  const match = new RegExp(`^pv_webhook_deliveries_total\\{[^}]*outcome="${outcome}"[^}]*\\}\\s+([\\d.e+]+)`, "m").exec(text)
  return match ? Number(match[1]) : 0
}
