import { readFile } from "node:fs/promises"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { MaxPageSize } from "./Paging.js"
import { type ChainVerdict, verifyEventChain } from "../domain/EventVerify.js"

/** `pv verify-events` failed: a broken chain, or a feed that could not be read. The message says which. */
export class VerifyEventsFailed extends Data.TaggedError("VerifyEventsFailed")<{ readonly message: string }> {}

export interface VerifyEventsOptions {
  readonly baseUrl?: string | undefined
  readonly apiKey?: string | undefined
  readonly publicId?: string | undefined
  /** A saved feed: an event page (or several pages' events) as JSON, optionally with its `jwks`. */
  readonly file?: string | undefined
}

interface Feed {
  readonly publicId: string | undefined
  readonly events: ReadonlyArray<unknown>
  readonly head: { readonly sequence: number; readonly eventHash: string | null } | undefined
  readonly jwks: unknown
  readonly keySource: string
}

const failed = (message: string) => new VerifyEventsFailed({ message })

const isRecord = (u: unknown): u is Record<string, any> => typeof u === "object" && u !== null && !Array.isArray(u)

const getJson = (url: string, apiKey?: string) =>
  Effect.tryPromise({
    try: async () => {
      const response = await fetch(url, { headers: apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` } })
      const text = await response.text()
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        body = undefined
      }
      return { status: response.status, body }
    },
    catch: (error) => failed(`cannot reach ${new URL(url).origin}: ${String((error as Error).message ?? error)}`)
  }).pipe(Effect.flatMap(({ status, body }) =>
    status === 200
      ? Effect.succeed(body)
      : Effect.fail(failed(`GET ${new URL(url).pathname} answered ${status}${isRecord(body) && typeof body.detail === "string" ? `: ${body.detail}` : ""}`))
  ))

const trimmed = (baseUrl: string) => baseUrl.replace(/\/+$/, "")

const fetchJwks = (baseUrl: string) => getJson(`${trimmed(baseUrl)}/api/v1/events/keys`)

/** Every page from the start, following next_after; the head is the one the last page reports. */
const fetchFeed = (baseUrl: string, apiKey: string, publicId: string) =>
  Effect.gen(function*() {
    const events: Array<unknown> = []
    let after = 0
    for (;;) {
      const url = `${trimmed(baseUrl)}/api/v1/events?public_id=${encodeURIComponent(publicId)}&after=${after}&limit=${MaxPageSize}`
      const page = yield* getJson(url, apiKey)
      if (!isRecord(page) || !Array.isArray(page.events) || !isRecord(page.head)) {
        return yield* Effect.fail(failed("the server's event page is not { events, next_after, head }"))
      }
      events.push(...page.events)
      if (page.next_after === null) {
        return { publicId, events, head: page.head as Feed["head"], jwks: yield* fetchJwks(baseUrl), keySource: "the server's JWKS" } satisfies Feed
      }
      if (!Number.isSafeInteger(page.next_after) || page.next_after <= after) {
        return yield* Effect.fail(failed(`the server's next_after (${String(page.next_after)}) does not advance past ${after}`))
      }
      after = page.next_after
    }
  })

/** A saved feed: `[events]` or `{ public_id?, events, head?, jwks? }`. A server's JWKS, when reachable, wins over the file's. */
const readFeed = (file: string, options: VerifyEventsOptions) =>
  Effect.gen(function*() {
    const text = yield* Effect.tryPromise({
      try: () => readFile(file, "utf8"),
      catch: (error) => failed(`cannot read ${file}: ${String((error as Error).message ?? error)}`)
    })
    const saved = yield* Effect.try({ try: () => JSON.parse(text) as unknown, catch: () => failed(`${file} is not JSON`) })
    const events = Array.isArray(saved) ? saved : isRecord(saved) && Array.isArray(saved.events) ? saved.events : undefined
    if (events === undefined) return yield* Effect.fail(failed(`${file} holds neither an event array nor an event page`))
    const record = isRecord(saved) ? saved : {}
    const publicId = options.publicId ?? (typeof record.public_id === "string" ? record.public_id : undefined)
    const head = isRecord(record.head) ? record.head as Feed["head"] : undefined
    if (options.baseUrl !== undefined) {
      return { publicId, events, head, jwks: yield* fetchJwks(options.baseUrl), keySource: "the server's JWKS" } satisfies Feed
    }
    if (!isRecord(record.jwks)) {
      return yield* Effect.fail(failed(`${file} has no "jwks": pass --base-url to fetch the keys from the service`))
    }
    return { publicId, events, head, jwks: record.jwks, keySource: `the JWKS in ${file}` } satisfies Feed
  })

const describe = (feed: Feed, verdict: ChainVerdict): string => {
  const name = feed.publicId ?? "event chain"
  if (verdict.ok) {
    return [
      `OK ${name}: ${verdict.count} event(s) verified${verdict.count > 0 ? ` (sequences 1..${verdict.head.sequence})` : ""}`,
      `   head: ${verdict.head.sequence} ${verdict.head.eventHash ?? "(none)"}${feed.head === undefined ? " (no head to compare with)" : ""}`,
      `   signed by: ${verdict.kids.length > 0 ? verdict.kids.join(", ") : "(no events)"}, checked against ${feed.keySource}`
    ].join("\n")
  }
  return [
    `FAILED ${name}: chain broken at sequence ${verdict.sequence} (${verdict.reason})`,
    `   ${verdict.detail}`,
    `   ${verdict.verified} event(s) before it verified`
  ].join("\n")
}

/**
 * `pv verify-events`: fetch every page of a determination's feed and the JWKS (or read a saved feed),
 * check every sequence, link, hash and signature, print a summary, and fail on a bad chain.
 */
export const verifyEventsCommand = (options: VerifyEventsOptions): Effect.Effect<ChainVerdict, VerifyEventsFailed> =>
  Effect.gen(function*() {
    let feed: Feed
    if (options.file !== undefined) {
      feed = yield* readFeed(options.file, options)
    } else if (options.baseUrl !== undefined && options.apiKey !== undefined && options.publicId !== undefined) {
      feed = yield* fetchFeed(options.baseUrl, options.apiKey, options.publicId)
    } else {
      return yield* Effect.fail(failed("usage: pv verify-events (--base-url URL --api-key KEY --public-id ID | --file FEED.json [--base-url URL])"))
    }
    const verdict = verifyEventChain(feed.events, feed.jwks, {
      ...(feed.publicId !== undefined ? { publicId: feed.publicId } : {}),
      ...(feed.head !== undefined ? { head: feed.head } : {})
    })
    const summary = describe(feed, verdict)
    if (!verdict.ok) return yield* Effect.fail(failed(summary))
    yield* Console.log(summary)
    return verdict
  })
