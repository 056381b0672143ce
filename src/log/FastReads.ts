import type * as Http from "node:http"
import { Clock, Effect, Layer } from "effect"
import { ClientAddresses } from "../access/ClientAddress.js"
import { RateLimits } from "../access/RateLimits.js"
import { etagMatches, strongEtagOf } from "../http/Conditional.js"
import { originOutcome } from "../http/Cors.js"
import { FrontDoor, type FirstHandler } from "../http/FrontDoor.js"
import { RequestIdHeader } from "../observability/RequestRecord.js"
import { AppConfig } from "../platform/Config.js"
import type { ConsistencyProof, InclusionProof } from "./Merkle.js"
import { TransparencyLog, type TileBytes, type TransparencyLogShape } from "./TransparencyLog.js"

/**
 * The log's public reads answered straight from memory by the front door (`FrontDoor.serveFirst`), before the
 * Effect app: full tiles and entry bundles from a byte cache with their headers made once, the checkpoint while
 * fresh, the key, and proofs whose tiles are all in memory (TransparencyLog's `fromMemory`). Everything else
 * (a tile or proof that needs the database, a refusal, a request over its address's limit or with an
 * `x-pv-internal-token`) is left to the app, whose handlers (log/Http.ts) send the same bytes with the same headers:
 * both build their answers here (`answerOf`). What the edge does for these paths is done here too: the request id,
 * metrics and log line (the front door's `answering`), the per-address limit, and CORS (`*`: the log is open to browsers).
 */

export const ImmutableTile = "public, max-age=31536000, immutable"

/** An answer to a GET: the 200's body and head, and the 304's head (its validators: no body, no content headers). */
export interface Answer {
  readonly body: Uint8Array
  readonly etag: string
  readonly ok: Readonly<Record<string, string | number>>
  readonly notModified: Readonly<Record<string, string>>
  /** `ok` and `notModified` as flat name, value lists (for the front door's one `writeHead`). */
  readonly okHead: ReadonlyArray<string>
  readonly notModifiedHead: ReadonlyArray<string>
}

const flat = (head: Readonly<Record<string, string | number>>): ReadonlyArray<string> => Object.entries(head).flatMap(([name, value]) => [name, String(value)])

export const answerOf = (body: Uint8Array, contentType: string, cacheControl?: string): Answer => {
  const etag = strongEtagOf(body)
  const validators: Record<string, string> = cacheControl === undefined ? { etag } : { "cache-control": cacheControl, etag }
  const ok = { "content-type": contentType, "content-length": body.length, ...validators }
  return { body, etag, ok, notModified: validators, okHead: flat(ok), notModifiedHead: flat(validators) }
}

const utf8 = new TextEncoder()
export const CheckpointType = "text/plain; charset=utf-8"
const JsonType = "application/json"

/**
 * A tile's answer, made once per bytes and kept by its caller's layer: a full tile's (or bundle's) bytes never
 * change, and a partial tile's bytes are a new array for each width (TransparencyLog never writes into one it has
 * handed out), so neither pays its ETag's SHA-256 again while its bytes are kept.
 */
export const tileAnswers = () => {
  const made = new WeakMap<Uint8Array, Answer>()
  const partial = new WeakMap<Uint8Array, Answer>()
  return ({ bytes, full }: TileBytes): Answer => {
    const answers = full ? made : partial
    let answer = answers.get(bytes)
    if (answer === undefined) answers.set(bytes, answer = answerOf(bytes, "application/octet-stream", full ? ImmutableTile : "no-cache"))
    return answer
  }
}

/** The checkpoint's answer, made once per note. */
export const checkpointAnswers = () => {
  let last: { readonly note: string; readonly answer: Answer } | undefined
  return (note: string): Answer => {
    if (last?.note !== note) last = { note, answer: answerOf(utf8.encode(note), CheckpointType, "no-cache") }
    return last.answer
  }
}

/** A proof's answer: the JSON the endpoint's schema writes (the same members in the same order). */
export const proofAnswerOf = (proof: InclusionProof | ConsistencyProof): Answer => answerOf(utf8.encode(JSON.stringify(proof)), JsonType)

/** The key's answer: the JSON its schema writes. */
export const keyAnswerOf = (key: TransparencyLogShape["key"]): Answer => answerOf(utf8.encode(JSON.stringify(key)), JsonType)

/** How many immutable answers the byte cache keeps: full tiles and bundles (each sharing its bytes with TransparencyLog's caches) and proofs. */
const CachedAnswers = 2_048

const DecimalPattern = /^(0|[1-9][0-9]{0,15})$/

/**
 * The two parameters of a proof query, when the query is exactly those two, once each, in plain decimal
 * (as safe integers); undefined for anything else, which the app answers (a 400, or what its schema makes of it).
 */
export const proofParameters = (query: string, a: string, b: string): readonly [number, number] | undefined => {
  let first: number | undefined
  let second: number | undefined
  for (const pair of query.split("&")) {
    const eq = pair.indexOf("=")
    const name = pair.slice(0, eq)
    const value = pair.slice(eq + 1)
    if (eq === -1 || !DecimalPattern.test(value) || !Number.isSafeInteger(Number(value))) return undefined
    if (name === a && first === undefined) first = Number(value)
    else if (name === b && second === undefined) second = Number(value)
    else return undefined
  }
  return first === undefined || second === undefined ? undefined : [first, second]
}

const NoOrigins: ReadonlySet<string> = new Set()

export const LogFastReadsLive = Layer.effectDiscard(Effect.gen(function*() {
  const log = yield* TransparencyLog
  const limits = yield* RateLimits
  const addresses = yield* ClientAddresses
  const frontDoor = yield* FrontDoor
  const clock = yield* Clock.Clock
  const { logRateLimitPerMinute } = yield* AppConfig
  const memory = log.fromMemory
  const checkpointAnswer = checkpointAnswers()
  const tileAnswerOf = tileAnswers()
  const keyAnswer = keyAnswerOf(log.key)
  /**
   * Answers that never change, by their path after `/log/` (with `?query` for proofs), least recently used first:
   * full tiles and bundles, and proofs (a proof for the same parameters is the same bytes in an append-only tree),
   * so a repeated read costs no JSON, no hashing of its ETag and no walk of the tiles.
   */
  const immutable = new Map<string, Answer>()
  const kept = (key: string): Answer | undefined => {
    const answer = immutable.get(key)
    if (answer !== undefined) {
      immutable.delete(key)
      immutable.set(key, answer)
    }
    return answer
  }
  const keep = (key: string, answer: Answer): Answer => {
    if (immutable.size >= CachedAnswers) immutable.delete(immutable.keys().next().value!)
    immutable.set(key, answer)
    return answer
  }

  const tileAnswer = (path: string): Answer | undefined => {
    const known = kept(path)
    if (known !== undefined) return known
    const tile = memory.tile(path)
    if (tile === undefined) return undefined
    const answer = tileAnswerOf(tile)
    return tile.full ? keep(path, answer) : answer
  }

  const proofAnswer = (path: string, query: string, proofOf: (query: string) => InclusionProof | ConsistencyProof | undefined): Answer | undefined => {
    const key = `${path}?${query}`
    const known = kept(key)
    if (known !== undefined) return known
    const proof = proofOf(query)
    return proof === undefined ? undefined : keep(key, proofAnswerOf(proof))
  }
  const inclusionOf = (query: string) => {
    const asked = proofParameters(query, "index", "tree_size")
    return asked === undefined ? undefined : memory.inclusion(asked[0], asked[1])
  }
  const consistencyOf = (query: string) => {
    const asked = proofParameters(query, "first", "second")
    return asked === undefined ? undefined : memory.consistency(asked[0], asked[1])
  }

  /** The answer to `path` (after `/log/`) with `query` (after `?`, or undefined), and its route; undefined when the app answers. */
  const answerTo = (path: string, query: string | undefined): readonly [Answer, string] | undefined => {
    if (path.startsWith("tile/")) {
      const answer = query === undefined ? tileAnswer(path) : undefined
      return answer === undefined ? undefined : [answer, "log/tile/*"]
    }
    if (query === undefined) {
      if (path === "checkpoint") {
        const note = memory.checkpoint()
        return note === undefined ? undefined : [checkpointAnswer(note), "log/checkpoint"]
      }
      return path === "key" ? [keyAnswer, "log/key"] : undefined
    }
    if (path === "proof/inclusion") {
      const answer = proofAnswer(path, query, inclusionOf)
      return answer === undefined ? undefined : [answer, "log/proof/inclusion"]
    }
    if (path === "proof/consistency") {
      const answer = proofAnswer(path, query, consistencyOf)
      return answer === undefined ? undefined : [answer, "log/proof/consistency"]
    }
    return undefined
  }

  const serve: FirstHandler = (req, res, answering) => {
    const url = req.url ?? ""
    const prefix = url.startsWith("/log/") ? "/" : url.startsWith("/api/v1/log/") ? "/api/v1/" : undefined
    if (prefix === undefined || req.headers["x-pv-internal-token"] !== undefined) return false
    const q = url.indexOf("?")
    const path = url.slice(prefix.length + 4, q === -1 ? undefined : q)
    const found = answerTo(path, q === -1 ? undefined : url.slice(q + 1))
    if (found === undefined) return false
    const origin = req.headers.origin
    const cors = origin === undefined ? undefined : originOutcome(NoOrigins, "GET", prefix + "log/" + path, origin, undefined)
    if (cors !== undefined && cors._tag !== "Allowed") return false
    if (!limits.allowAddressNow("log", addresses.ofNode(req), logRateLimitPerMinute, clock.currentTimeMillisUnsafe())) return false
    const [answer, route] = found
    const id = answering(req, res, prefix + route)
    if (cors !== undefined) for (const name in cors.headers) res.setHeader(name, cors.headers[name]!)
    writeAnswer(req, res, answer, id)
    return true
  }
  frontDoor.serveFirst(serve)
}))

/**
 * The answer's head in one `writeHead` of a flat list (node:http then stores it as it is, with no `setHeader` per
 * field), the request id last.
 */
const writeAnswer = (req: Http.IncomingMessage, res: Http.ServerResponse, answer: Answer, id: string) => {
  if (etagMatches(req.headers["if-none-match"], answer.etag)) {
    res.writeHead(304, [...answer.notModifiedHead, RequestIdHeader, id])
    res.end()
  } else {
    res.writeHead(200, [...answer.okHead, RequestIdHeader, id])
    res.end(answer.body)
  }
}
