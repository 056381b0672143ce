import { Context, Effect, Layer, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import type { EventHead } from "../domain/MachineTrust.js"
import type { DeterminationNotFound, ValidationFailed } from "../domain/Problem.js"
import type { PublicId } from "../domain/PublicId.js"
import { EventPage } from "../domain/TrustEvent.js"
import { ChangeFeed } from "./ChangeFeed.js"
import { EventLog } from "./EventLog.js"
import { DefaultPageSize } from "./Paging.js"

/** Even if a notification were lost, no instance serves a chain head older than this (as the trust cache). */
export const HeadCacheMaxAgeMs = 5_000
/** The page bodies kept, in bytes of JSON (a page of 100 events is ~60 KB), each entry's overhead counted. */
const PageBudgetBytes = 16 * 1024 * 1024
/** What an entry holds besides its bytes (its key, the response and its headers), counted against the budget. */
const EntryOverheadBytes = 1024
/**
 * Page bytes in a buffer of their own: `Buffer.from` of a short text takes a slice of Node's shared 8 KB pool,
 * and a kept slice keeps the whole block alive, uncounted (an empty page past the head is ~150 bytes).
 */
const utf8 = new TextEncoder()
/** A chain head is a few dozen bytes: this many stay well under a megabyte. */
const HeadCapacity = 10_000

/**
 * One page as sent: its JSON (encoded through EventPage once, kept as UTF-8 bytes, so a hit costs no
 * encoding and no length scan of a page: ~22 KB for 30 events, ~700 KB for the largest) and its validator; `ok` is the 200 built from
 * them once (responses are immutable values; each request's middlewares add their headers to a copy).
 */
export interface PageBody {
  readonly bytes: Uint8Array
  readonly etag: string
  readonly ok: HttpServerResponse.HttpServerResponse
}

/** What a request for a page needs first: the chain head the page is bounded by, and so its ETag. */
export interface PageRef {
  readonly publicId: PublicId
  readonly head: EventHead
  readonly after: number
  readonly limit: number
  readonly etag: string
}

/** The validators every answer for a page carries: its ETag, and "revalidate before reuse". */
export const pageValidators = (etag: string) => ({ etag, "cache-control": "no-cache" })

export interface EventPagesShape {
  /** The head and the ETag of a page: enough for a 304, with no events read. */
  readonly ref: (publicId: PublicId, after: number | undefined, limit: number | undefined) => Effect.Effect<PageRef, DeterminationNotFound>
  /** The page's body, from memory when this page of this head was sent before. */
  readonly body: (ref: PageRef) => Effect.Effect<PageBody, ValidationFailed>
}

/**
 * A page is a function of (chain, after, limit, head): every event up to the head is sealed and never
 * changes, so a page's bytes are too until the head moves. The ETag names that head; the body is encoded
 * once per head and kept (within a byte budget). The head itself is cached per chain and dropped on every
 * committed change heard on the change feed, like a trust document, so a warm page costs no database round
 * trip and a revalidation with If-None-Match is a 304 without reading a single event.
 */
const make = Effect.gen(function*() {
  const log = yield* EventLog
  const feed = yield* ChangeFeed
  const encode = Schema.encodeSync(EventPage)
  const heads = new Map<string, { readonly head: EventHead; readonly atMs: number }>()
  const generations = new Map<string, number>()
  const pages = new Map<string, PageBody>()
  let pageBytes = 0

  const generation = (publicId: string) => generations.get(publicId) ?? 0

  yield* feed.listen((notice) => {
    if (notice._tag === "resync") {
      for (const key of heads.keys()) generations.set(key, generation(key) + 1)
      heads.clear()
      return
    }
    heads.delete(notice.publicId)
    generations.set(notice.publicId, generation(notice.publicId) + 1)
  })

  const headOf = (publicId: PublicId): Effect.Effect<EventHead, DeterminationNotFound> => {
    const cached = heads.get(publicId)
    if (cached !== undefined && performance.now() - cached.atMs < HeadCacheMaxAgeMs) return Effect.succeed(cached.head)
    const seen = generation(publicId)
    return Effect.tap(log.head(publicId), (head) =>
      Effect.sync(() => {
        // A change committed while the head was read: what was read may be older than it, so keep nothing.
        if (generation(publicId) !== seen) return
        if (!heads.has(publicId) && heads.size >= HeadCapacity) heads.delete(heads.keys().next().value!)
        heads.set(publicId, { head, atMs: performance.now() })
      }))
  }

  const ref = (publicId: PublicId, after: number | undefined, limit: number | undefined) =>
    Effect.map(headOf(publicId), (head): PageRef => {
      const from = after ?? 0
      const size = limit ?? DefaultPageSize
      return { publicId, head, after: from, limit: size, etag: `"${head.sequence}.${from}.${size}.${(head.eventHash ?? "").slice(0, 16)}"` }
    })

  const sizeOf = (body: PageBody) => body.bytes.byteLength + EntryOverheadBytes
  const remember = (key: string, body: PageBody) => {
    const size = sizeOf(body)
    if (size > PageBudgetBytes / 16) return
    const previous = pages.get(key)
    if (previous !== undefined) {
      pages.delete(key)
      pageBytes -= sizeOf(previous)
    }
    while (pageBytes + size > PageBudgetBytes && pages.size > 0) {
      const [oldestKey, oldest] = pages.entries().next().value!
      pages.delete(oldestKey)
      pageBytes -= sizeOf(oldest)
    }
    pages.set(key, body)
    pageBytes += size
  }

  const body = (page: PageRef): Effect.Effect<PageBody, ValidationFailed> => {
    const key = `${page.publicId}\n${page.after}\n${page.limit}`
    const kept = pages.get(key)
    if (kept !== undefined && kept.etag === page.etag) return Effect.succeed(kept)
    return Effect.map(log.pageAt(page.publicId, page.head, { after: page.after, limit: page.limit }), (built) => {
      const bytes = utf8.encode(JSON.stringify(encode(built)))
      const made: PageBody = {
        bytes,
        etag: page.etag,
        ok: HttpServerResponse.uint8Array(bytes, { contentType: "application/json", headers: pageValidators(page.etag) })
      }
      remember(key, made)
      return made
    })
  }

  return { ref: Effect.fn("EventPages.ref")(ref), body: Effect.fn("EventPages.body")(body) } satisfies EventPagesShape
})

export class EventPages extends Context.Service<EventPages, EventPagesShape>()("pv/EventPages") {
  static readonly layer = Layer.effect(EventPages, make)
}
