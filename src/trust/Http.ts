import { Effect, Layer } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { ClientAddresses } from "../access/ClientAddress.js"
import { RateLimits } from "../access/RateLimits.js"
import { groupApi } from "../api/GroupApi.js"
import { TrustApi } from "./Api.js"
import { jsonTextEncoder } from "../domain/Json.js"
import { MachineTrustResponse } from "../domain/MachineTrust.js"
import { requirePublicId } from "../domain/PublicId.js"
import { etagMatches } from "../http/Conditional.js"
import { withMiddlewaresOnly } from "../http/GroupContext.js"
import { AppConfig } from "../platform/Config.js"
import type { CachedTrust } from "./TrustCache.js"
import { TrustResolver } from "./TrustResolver.js"

/** The trust endpoints' success schema (src/trust/Api.ts declares MachineTrustResponse) writes the body. */
const documentJson = jsonTextEncoder(MachineTrustResponse)

/**
 * The resolver returns the document; its body is encoded here, through the declared success schema, once
 * per cache entry (not per request), and sent as-is on every hit. The ETag is the digest, not a hash of the bytes.
 */
interface Answers {
  readonly etag: string
  readonly ok: HttpServerResponse.HttpServerResponse
  readonly notModified: HttpServerResponse.HttpServerResponse
}
/**
 * Responses are immutable values, so the 200 and the 304 of a cached document are built once per cache
 * entry, on first use, and kept by the handlers' layer while the entry lives; the per-request headers
 * (request id, RateLimit, CORS) are set on each request's Node response, which the platform merges with the
 * answer's own when it writes the head.
 */
const conditionalAnswers = () => {
  const answers = new WeakMap<CachedTrust, Answers>()
  const answersOf = (trust: CachedTrust): Answers => {
    let found = answers.get(trust)
    if (found === undefined) {
      const etag = `"${trust.document.trust_state_digest}"`
      const headers = { etag, "cache-control": "no-cache" }
      found = {
        etag,
        ok: HttpServerResponse.text(documentJson(trust.document), { contentType: "application/json", headers }),
        notModified: HttpServerResponse.empty({ status: 304, headers })
      }
      answers.set(trust, found)
    }
    return found
  }
  return (trust: CachedTrust, ifNoneMatch: string | undefined) => {
    const found = answersOf(trust)
    return etagMatches(ifNoneMatch, found.etag) ? found.notModified : found.ok
  }
}

/** Built with its middlewares only: see http/GroupContext.ts. */
export const TrustHttpLive = Layer.unwrap(
  Effect.gen(function*() {
    const resolver = yield* TrustResolver
    const limits = yield* RateLimits
    const { humanRateLimitPerMinute } = yield* AppConfig
    const addresses = yield* ClientAddresses
    const conditional = conditionalAnswers()
    const resolveCached = (publicId: string) => Effect.flatMap(requirePublicId(publicId), resolver.resolveCached)
    const group = HttpApiBuilder.group(groupApi(TrustApi), "trust", (handlers) =>
      handlers
        // trust:read is checked by ApiKeyAuth (the endpoint's RequiredScope).
        .handle("machine", ({ params, headers }) =>
          Effect.map(resolveCached(params.publicId), (trust) => conditional(trust, headers["if-none-match"])))
        .handle("human", ({ params, headers, request }) =>
          limits.consumeAddress("human", addresses.of(request), humanRateLimitPerMinute).pipe(
            Effect.andThen(resolveCached(params.publicId)),
            Effect.map((trust) => conditional(trust, headers["if-none-match"]))
          )))
    return withMiddlewaresOnly(group)
  })
)
