import { Context, Effect, Layer, Scope } from "effect"
import { ApiKeyAuth } from "../api/Auth.js"
import { RequestGuard } from "../api/Guard.js"

/**
 * `HttpApiBuilder.group` keeps the whole context it is built in and provides it to every request of the
 * group: a merge, so a copy of the request's context plus one write per service (about 40 in this app), on
 * every request. A group built through here sees only its endpoints' middlewares (which HandlersLive in
 * app/HttpLive.ts provides to the groups alone); its handlers take their services beforehand, in the full
 * context (`Layer.unwrap`). What an endpoint reads per request (Caller, the request) is in the request's
 * own context. The type holds it to that: a group that needs anything else at build time does not compile.
 */
export const withMiddlewaresOnly = <A, E>(
  group: Layer.Layer<A, E, ApiKeyAuth | RequestGuard>
): Layer.Layer<A, E, ApiKeyAuth | RequestGuard> =>
  Layer.effectContext(
    Effect.updateContext(
      Layer.build(group),
      (context: Context.Context<Scope.Scope | ApiKeyAuth | RequestGuard>) => Context.pick(Scope.Scope, ApiKeyAuth, RequestGuard)(context)
    )
  )
