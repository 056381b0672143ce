import { Effect, Layer } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { ClientAddresses } from "../access/ClientAddress.js"
import { RateLimits } from "../access/RateLimits.js"
import { groupApi } from "../api/GroupApi.js"
import { LogApi, RootLogApi } from "./Api.js"
import { AppConfig } from "../platform/Config.js"
import { etagMatches } from "../http/Conditional.js"
import { countedPolicy, serializePolicy } from "../verify/Policy.js"
import { type Answer, checkpointAnswers, keyAnswerOf, proofAnswerOf, tileAnswers } from "./FastReads.js"
import { TransparencyLog } from "./TransparencyLog.js"

/** An answer (log/FastReads.ts builds both paths' answers) to `request`: 304 when its If-None-Match matches. */
const respond = (request: HttpServerRequest.HttpServerRequest, answer: Answer): HttpServerResponse.HttpServerResponse =>
  etagMatches(request.headers["if-none-match"], answer.etag)
    ? HttpServerResponse.empty({ status: 304, headers: answer.notModified })
    : HttpServerResponse.uint8Array(answer.body, { contentType: String(answer.ok["content-type"]), headers: answer.notModified })

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
  const checkpointAnswer = checkpointAnswers()
  const tileAnswerOf = tileAnswers()
  const keyAnswer = keyAnswerOf(log.key)
  type Args = { readonly request: HttpServerRequest.HttpServerRequest }
  type Query<K extends string> = Args & { readonly query: { readonly [key in K]?: string } }
  return {
    checkpoint: ({ request }: Args) =>
      limited(request, log.checkpoint).pipe(Effect.map((note) => respond(request, checkpointAnswer(note)))),
    key: ({ request }: Args) => limited(request, Effect.succeed(respond(request, keyAnswer))),
    policy: ({ request }: Args) =>
      limited(request, Effect.succeed(HttpServerResponse.text(policy, { contentType: "text/plain; charset=utf-8" }))),
    tile: ({ request }: Args) =>
      limited(request, log.tile(tilePathOf(request.url))).pipe(Effect.map((tile) => respond(request, tileAnswerOf(tile)))),
    inclusion: ({ request, query }: Query<"index" | "tree_size">) =>
      limited(request, log.inclusion(query.index, query.tree_size)).pipe(Effect.map((proof) => respond(request, proofAnswerOf(proof)))),
    consistency: ({ request, query }: Query<"first" | "second">) =>
      limited(request, log.consistency(query.first, query.second)).pipe(Effect.map((proof) => respond(request, proofAnswerOf(proof))))
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
