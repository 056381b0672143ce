import { Effect, Layer } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { ClientAddresses } from "../access/ClientAddress.js"
import { RateLimits } from "../access/RateLimits.js"
import { groupApi } from "../api/GroupApi.js"
import { LogApi, RootLogApi } from "./Api.js"
import { AppConfig } from "../platform/Config.js"
import { countedPolicy, serializePolicy } from "../verify/Policy.js"
import { TransparencyLog } from "./TransparencyLog.js"

const ImmutableTile = "public, max-age=31536000, immutable"

/** The part after `/log/` (of `/api/v1/log/…` and of the root's `/log/…`). */
const tilePathOf = (url: string): string => {
  const path = url.split("?")[0]!
  const at = path.indexOf("/log/")
  return at === -1 ? "" : path.slice(at + "/log/".length)
}

/** Every log endpoint is open and counted per client address first: the handlers, by endpoint name. */
const makeHandlers = Effect.gen(function*() {
  const log = yield* TransparencyLog
  const limits = yield* RateLimits
  const addresses = yield* ClientAddresses
  const { logRateLimitPerMinute, logWitnesses, logWitnessQuorum } = yield* AppConfig
  const policy = serializePolicy(countedPolicy(log.key.verifier_key, logWitnesses.map((w) => ({ vkey: w.verifierKey, url: w.url })), logWitnessQuorum))
  const limited = <A, E, R>(request: HttpServerRequest.HttpServerRequest, work: Effect.Effect<A, E, R>) =>
    Effect.andThen(limits.consumeAddress("log", addresses.of(request), logRateLimitPerMinute), work)
  type Args = { readonly request: HttpServerRequest.HttpServerRequest }
  type Query<K extends string> = Args & { readonly query: { readonly [key in K]?: string } }
  return {
    checkpoint: ({ request }: Args) =>
      limited(request, log.checkpoint).pipe(Effect.map((note) =>
        HttpServerResponse.text(note, { contentType: "text/plain; charset=utf-8", headers: { "cache-control": "no-cache" } }))),
    key: ({ request }: Args) => limited(request, Effect.succeed(log.key)),
    policy: ({ request }: Args) =>
      limited(request, Effect.succeed(HttpServerResponse.text(policy, { contentType: "text/plain; charset=utf-8" }))),
    tile: ({ request }: Args) =>
      limited(request, log.tile(tilePathOf(request.url))).pipe(Effect.map(({ bytes, full }) =>
        HttpServerResponse.uint8Array(bytes, {
          contentType: "application/octet-stream",
          headers: { "cache-control": full ? ImmutableTile : "no-cache" }
        }))),
    inclusion: ({ request, query }: Query<"index" | "tree_size">) => limited(request, log.inclusion(query.index, query.tree_size)),
    consistency: ({ request, query }: Query<"first" | "second">) => limited(request, log.consistency(query.first, query.second))
  }
})

/** The same handlers serve the group under /api/v1 and at the root (`RootLogApi`, log/Api.ts). */
export const LogHttpLive = Layer.merge(
  HttpApiBuilder.group(groupApi(LogApi), "log", (handlers) =>
    Effect.map(makeHandlers, (h) =>
      handlers.handle("checkpoint", h.checkpoint).handle("key", h.key).handle("policy", h.policy).handle("tile", h.tile)
        .handle("inclusion", h.inclusion).handle("consistency", h.consistency))),
  HttpApiBuilder.group(groupApi(RootLogApi), "rootLog", (handlers) =>
    Effect.map(makeHandlers, (h) =>
      handlers.handle("checkpoint", h.checkpoint).handle("key", h.key).handle("policy", h.policy).handle("tile", h.tile)
        .handle("inclusion", h.inclusion).handle("consistency", h.consistency)))
)
