import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { groupApi } from "../api/GroupApi.js"
import { ApiKeysApi } from "./Api.js"
import { ApiKeys } from "./ApiKeys.js"

export const ApiKeysHttpLive = HttpApiBuilder.group(groupApi(ApiKeysApi), "apiKeys", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    return handlers
      .handle("create", ({ payload }) => keys.create(payload))
      .handle("list", ({ query }) =>
        Effect.map(keys.list(Option.fromNullishOr(query.tenant_id)), (list) => ({ keys: list })))
      .handle("revoke", ({ params }) => keys.revoke(params.keyId))
  }))
