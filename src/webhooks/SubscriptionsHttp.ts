import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Caller } from "../api/Auth.js"
import { groupApi } from "../api/GroupApi.js"
import { SubscriptionsApi } from "./SubscriptionsApi.js"
import { requirePublicId } from "../domain/PublicId.js"
import { DefaultPageSize } from "../events/Paging.js"
import { Subscription, Subscriptions } from "./Subscriptions.js"

const encodeSubscription = Schema.encodeSync(Subscription)

export const SubscriptionsHttpLive = HttpApiBuilder.group(groupApi(SubscriptionsApi), "subscriptions", (handlers) =>
  Effect.gen(function*() {
    const subscriptions = yield* Subscriptions
    // subscription:write is checked by ApiKeyAuth (the group's RequiredScope); each call acts for its key's tenant.
    return handlers
      // Two successes with one schema: HttpApi would pick the first (201) for a repeat too, so the status is chosen here.
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const key = yield* Caller
          const publicId = yield* requirePublicId(payload.public_id)
          const { created, subscription } = yield* subscriptions.subscribe(key, publicId, payload.webhook_url, payload.signature_scheme)
          return HttpServerResponse.jsonUnsafe(encodeSubscription(subscription), { status: created ? 201 : 200 })
        }))
      .handle("list", ({ query }) =>
        Effect.flatMap(Caller, (key) => subscriptions.list(key.tenant_id, { after: query.after, limit: query.limit ?? 50 })))
      .handle("get", ({ params }) => Effect.flatMap(Caller, (key) => subscriptions.get(key.tenant_id, params.subscriptionId)))
      .handle("delete", ({ params }) => Effect.flatMap(Caller, (key) => subscriptions.remove(key.tenant_id, params.subscriptionId)))
      .handle("resume", ({ params }) => Effect.flatMap(Caller, (key) => subscriptions.resume(key.tenant_id, params.subscriptionId)))
      .handle("rotateSecret", ({ params }) =>
        Effect.flatMap(Caller, (key) => subscriptions.rotateSecret(key.tenant_id, params.subscriptionId)))
      .handle("attempts", ({ params, query }) =>
        Effect.flatMap(Caller, (key) =>
          subscriptions.attempts(key.tenant_id, params.subscriptionId, { after: query.after, limit: query.limit ?? DefaultPageSize })))
      .handle("redeliver", ({ params, payload }) =>
        Effect.flatMap(Caller, (key) => subscriptions.redeliver(key.tenant_id, params.subscriptionId, payload.from_sequence)))
  }))
