import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { groupApi } from "../api/GroupApi.js"
import { WebhooksApi } from "./Api.js"
import { WebhookKey } from "./WebhookKey.js"

export const WebhooksHttpLive = HttpApiBuilder.group(groupApi(WebhooksApi), "webhooks", (handlers) =>
  Effect.gen(function*() {
    const key = yield* WebhookKey
    const answer = { public_key: key.publicKey, kid: key.kid }
    return handlers.handle("signingKey", () => Effect.succeed(answer))
  }))
