import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { Api } from "../http/Api.js"
import { ApiKeys } from "./ApiKeys.js"

export const ApiKeysHttpLive = HttpApiBuilder.group(Api, "apiKeys", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    return handlers
      .handle("create", ({ payload }) => keys.create(payload))
      .handle("list", ({ urlParams }) =>
        Effect.map(keys.list(Option.fromNullable(urlParams.tenant_id)), (list) => ({ keys: list })))
      .handle("revoke", ({ path }) => keys.revoke(path.keyId))
  }))
