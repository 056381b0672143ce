import { HttpApi, type HttpApiGroup } from "effect/http-api"
import { RequestGuard } from "./Guard.js"

/** The API's identifier: a group's handlers are found by it and the group's identifier (HttpApiBuilder.layer). */
export const ApiId = "pv-trust"

/**
 * What every group of the API shares, applied to the API of all groups (app/Api.ts) and to each group's own
 * (`groupApi`): `RequestGuard` adds the answers every operation can give (400/413/415/422/500/503), and request
 * bodies are decoded strictly: an unknown member is an error, and every failing member is reported.
 */
export const withEdgeRules = <Id extends string, Groups extends HttpApiGroup.Constraint>(api: HttpApi.HttpApi<Id, Groups>) =>
  api
    .middleware(RequestGuard)
    .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "all" })

const groupApis = new WeakMap<HttpApiGroup.Constraint, unknown>()

/**
 * A group's HttpApi: the group with the API's edge rules, under the API's identifier. A feature builds its
 * handlers on it (`HttpApiBuilder.group(groupApi(TrustApi), "trust", …)`) instead of on app/Api.ts, which
 * imports every feature: `HttpApiBuilder.group` reads only the group and the API's annotations, and the layer
 * it returns is the service `HttpApiBuilder.layer(Api)` looks the group up by. One value per group, so the
 * endpoints a request carries are the same objects on every build (access/AuthLive.ts keys its scopes by them).
 */
export const groupApi = <G extends HttpApiGroup.Constraint>(group: G) => {
  let api = groupApis.get(group) as ReturnType<typeof makeGroupApi<G>> | undefined
  if (api === undefined) {
    api = makeGroupApi(group)
    groupApis.set(group, api)
  }
  return api
}

const makeGroupApi = <G extends HttpApiGroup.Constraint>(group: G) => withEdgeRules(HttpApi.make(ApiId).add(group))
