import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { requireScope } from "../access/ApiKeys.js"
import { ClientAddresses } from "../access/ClientAddress.js"
import { RateLimits } from "../access/RateLimits.js"
import { Api } from "../api/Api.js"
import { requirePublicId } from "../domain/PublicId.js"
import { AppConfig } from "../platform/Config.js"
import type { CachedTrust } from "./TrustCache.js"
import { TrustResolver } from "./TrustResolver.js"

/** `If-None-Match` per RFC 9110: a list of (weak or strong) tags, or `*`. */
export const etagMatches = (header: string | undefined, etag: string): boolean =>
  header !== undefined &&
  header.split(",").some((candidate) => {
    const tag = candidate.trim().replace(/^W\//, "")
    return tag === "*" || tag === etag
  })

/**
 * The cached body is sent as-is: it was encoded through the declared success schema (MachineTrustResponse)
 * once per cached document (TrustResolver), not per request. The ETag is the digest, not a hash of the bytes.
 */
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
    const resolveCached = (publicId: string) => Effect.flatMap(requirePublicId(publicId), resolver.resolveCached)
    return handlers
      .handle("machine", ({ params, headers }) =>
        requireScope("trust:read").pipe(
          Effect.andThen(resolveCached(params.publicId)),
          Effect.map((trust) => conditional(trust, headers["if-none-match"]))
        ))
      .handle("human", ({ params, headers, request }) =>
        limits.consumeAddress("human", addresses.of(request), humanRateLimitPerMinute).pipe(
          Effect.andThen(resolveCached(params.publicId)),
          Effect.map((trust) => conditional(trust, headers["if-none-match"]))
        ))
  }))
