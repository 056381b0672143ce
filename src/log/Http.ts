import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { ClientAddresses } from "../access/ClientAddress.js"
import { RateLimits } from "../access/RateLimits.js"
import { Api } from "../api/Api.js"
import { AppConfig } from "../platform/Config.js"
import { TransparencyLog } from "./TransparencyLog.js"

const ImmutableTile = "public, max-age=31536000, immutable"

/** The part after `/log/` (the front door serves `/log/…` as `/api/v1/log/…`). */
const tilePathOf = (url: string): string => {
  const path = url.split("?")[0]!
  const at = path.indexOf("/log/")
  return at === -1 ? "" : path.slice(at + "/log/".length)
}

/** Every log endpoint is open and counted per client address first. */
export const LogHttpLive = HttpApiBuilder.group(Api, "log", (handlers) =>
  Effect.gen(function*() {
    const log = yield* TransparencyLog
    const limits = yield* RateLimits
    const addresses = yield* ClientAddresses
    const { logRateLimitPerMinute } = yield* AppConfig
    const limited = <A, E, R>(request: Parameters<typeof addresses.of>[0], work: Effect.Effect<A, E, R>) =>
      Effect.andThen(limits.consumeAddress("log", addresses.of(request), logRateLimitPerMinute), work)
    return handlers
      .handle("checkpoint", ({ request }) =>
        limited(request, log.checkpoint).pipe(Effect.map((note) =>
          HttpServerResponse.text(note, { contentType: "text/plain; charset=utf-8", headers: { "cache-control": "no-cache" } }))))
      .handle("key", ({ request }) => limited(request, Effect.succeed(log.key)))
      .handle("tile", ({ request }) =>
        limited(request, log.tile(tilePathOf(request.url))).pipe(Effect.map(({ bytes, full }) =>
          HttpServerResponse.uint8Array(bytes, {
            contentType: "application/octet-stream",
            headers: { "cache-control": full ? ImmutableTile : "no-cache" }
          }))))
      .handle("inclusion", ({ request, query }) => limited(request, log.inclusion(query.index, query.tree_size)))
      .handle("consistency", ({ request, query }) => limited(request, log.consistency(query.first, query.second)))
  }))
