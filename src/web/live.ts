import { verifyEventChain, type ChainHead, type ChainReport } from "./verifier.js"

/**
 * Following an event chain live (GET /api/v1/events/stream), without the network: a Server-Sent Events
 * parser fed decoded text as it arrives, and the check of one arriving event against the one before it.
 * The stream needs an Authorization header, which EventSource cannot send, so the page reads it with
 * fetch() and parses it here. Every check is the verifier's: an arriving event is a chain of one,
 * anchored on the event before it. test/web/live.test.ts covers this file in Node.
 */

export interface SseMessage {
  readonly id: string
  readonly event: string
  readonly data: string
}

/** A line longer than this is not an event of this service: the stream is treated as broken. */
export const MaxSseLine = 1 << 20

/**
 * A parser for the text/event-stream format (the WHATWG HTML "event stream interpretation"): lines end
 * in CRLF, LF or CR; `data` lines join with LF; `id` persists until changed (it is what Last-Event-ID
 * resumes from); comment lines (`: keep-alive`) and `retry` are ignored; a blank line dispatches, unless
 * no data was given. Returns a function taking the next decoded text and returning the messages it
 * completed. Throws when a line passes MaxSseLine, so a stream that never ends a line cannot exhaust memory.
 */
export const sseParser = (): (chunk: string) => Array<SseMessage> => {
  let buffer = ""
  let lastId = ""
  let event = ""
  let data: Array<string> | undefined
  // A CR that ended the last chunk may be the first half of a CRLF split across chunks: its LF is skipped.
  let afterCr = false
  return (chunk) => {
    if (chunk === "") return []
    buffer += afterCr && chunk.startsWith("\n") ? chunk.slice(1) : chunk
    afterCr = false
    const messages: Array<SseMessage> = []
    for (;;) {
      const end = /\r\n|\r|\n/.exec(buffer)
      if (end === null) break
      if (end[0] === "\r" && end.index === buffer.length - 1) afterCr = true
      const line = buffer.slice(0, end.index)
      buffer = buffer.slice(end.index + end[0].length)
      if (line === "") {
        if (data !== undefined) messages.push({ id: lastId, event: event === "" ? "message" : event, data: data.join("\n") })
        event = ""
        data = undefined
        continue
      }
      if (line.startsWith(":")) continue
      const colon = line.indexOf(":")
      const field = colon < 0 ? line : line.slice(0, colon)
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "")
      if (field === "data") (data ??= []).push(value)
      else if (field === "event") event = value
      else if (field === "id" && !value.includes("\0")) lastId = value
    }
    if (buffer.length > MaxSseLine) throw new Error(`the stream sent a line longer than ${MaxSseLine} characters`)
    return messages
  }
}

export interface Keyring {
  readonly jwks: () => Promise<unknown>
  /** Whether the keys were fetched again. */
  readonly refresh: (kid: string) => Promise<boolean>
}

/**
 * The keys events are checked against, fetched again once when an event names a kid they lack (a key
 * the service started signing with after the page fetched them). A kid still unknown after that
 * refetch is not fetched for again: the event is rejected as unknown-kid.
 */
export const keyring = (fetchJwks: () => Promise<unknown>): Keyring => {
  let current: Promise<unknown> | undefined
  const refetchedFor = new Set<string>()
  // A failed fetch is not kept: the next event asks again.
  const load = () => {
    const loading = fetchJwks()
    loading.catch(() => {
      if (current === loading) current = undefined
    })
    return loading
  }
  return {
    jwks: () => (current ??= load()),
    refresh: async (kid) => {
      if (refetchedFor.has(kid)) return false
      refetchedFor.add(kid)
      current = load()
      await current
      return true
    }
  }
}

export interface Arrival {
  readonly report: ChainReport
  readonly event: unknown
  readonly next: ChainHead
  readonly refetchedKeys: boolean
}

/**
 * Checks one arriving event against the event before it (`previous`; sequence 0 and a null hash before
 * the first): its eventHash recomputed, previousEventHash and sequence linking to `previous`, its
 * public id, and its Ed25519 signature by a published key. `next` is what the following event must link
 * to: this event's stated sequence and hash even when it was rejected, so each later event is judged on
 * its own (a changed payload rejects one event, not every event after it).
 * `data` is the message's data: one event as JSON.
 */
export const checkArrival = async (data: string, previous: ChainHead, publicId: string, keys: Keyring): Promise<Arrival> => {
  let event: unknown
  try {
    event = JSON.parse(data)
  } catch {
    event = data
  }
  const verify = async () => verifyEventChain([event], await keys.jwks(), { publicId, anchor: previous })
  let report = await verify()
  let refetchedKeys = false
  if (!report.ok && report.reason === "unknown-kid") {
    const kid = report.events[0]?.kid
    if (kid !== null && kid !== undefined && (await keys.refresh(kid))) {
      refetchedKeys = true
      report = await verify()
    }
  }
  const record = (typeof event === "object" && event !== null ? event : {}) as Record<string, unknown>
  const stated = Number.isSafeInteger(record.sequence) && typeof record.eventHash === "string"
    ? { sequence: record.sequence as number, eventHash: record.eventHash }
    : previous
  return { report, event, next: report.ok ? report.head : stated, refetchedKeys }
}
