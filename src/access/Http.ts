import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.js"
import { ApiKeys } from "./ApiKeys.js"

export const ApiKeysHttpLive = HttpApiBuilder.group(Api, "apiKeys", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    return handlers
      .handle("create", ({ payload }) => keys.create(payload))
      .handle("list", ({ query }) =>
        Effect.map(keys.list(Option.fromNullishOr(query.tenant_id)), (list) => ({ keys: list })))
      .handle("revoke", ({ params }) => keys.revoke(params.keyId))
  }))
