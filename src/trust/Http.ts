import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { requireScope } from "../access/ApiKeys.js"
import { ClientAddresses } from "../access/ClientAddress.js"
import { RateLimits } from "../access/RateLimits.js"
import { AppConfig } from "../platform/Config.js"
import { Api } from "../http/Api.js"
import type { CachedTrust } from "./TrustCache.js"
import { TrustResolver } from "./TrustResolver.js"

/** `If-None-Match` per RFC 9110: a list of (weak or strong) tags, or `*`. */
export const etagMatches = (header: string | undefined, etag: string): boolean =>
  header !== undefined &&
  header.split(",").some((candidate) => {
    const tag = candidate.trim().replace(/^W\//, "")
    return tag === "*" || tag === etag
  })

/** The cached serialisation is sent as-is: no per-request JSON encoding of the document. */
const conditional = (trust: CachedTrust, ifNoneMatch: string | undefined) => {
  const etag = `"${trust.document.trust_state_digest}"`
  const headers = { etag, "cache-control": "no-cache" }
  return etagMatches(ifNoneMatch, etag)
    ? HttpServerResponse.empty({ status: 304, headers })
    : HttpServerResponse.text(trust.json, { contentType: "application/json", headers })
}

export const TrustHttpLive = HttpApiBuilder.group(Api, "trust", (handlers) =>
  Effect.gen(function*() {
    const resolver = yield* TrustResolver
    const limits = yield* RateLimits
    const { humanRateLimitPerMinute } = yield* AppConfig
    const addresses = yield* ClientAddresses
    return handlers
      .handle("machine", ({ path, headers }) =>
        requireScope("trust:read").pipe(
          Effect.zipRight(resolver.resolveCached(path.publicId)),
          Effect.map((trust) => conditional(trust, headers["if-none-match"]))
        ))
      .handle("human", ({ path, headers, request }) =>
        limits.consumeAddress("human", addresses.of(request), humanRateLimitPerMinute).pipe(
          Effect.zipRight(resolver.resolveCached(path.publicId)),
          Effect.map((trust) => conditional(trust, headers["if-none-match"]))
        ))
  }))
