import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.js"
import { WebhookKey } from "./WebhookKey.js"

export const WebhooksHttpLive = HttpApiBuilder.group(Api, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const key = yield* WebhookKey
    const answer = { public_key: key.publicKey, kid: key.kid }
    return handlers.handle("signingKey", () => Effect.succeed(answer))
  }))
