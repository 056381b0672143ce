import { Context } from "effect"
import { OpenApi } from "effect/http-api"
import { ApiKeyAuth, type KeyScope, OperatorAuth, RequiredScope } from "../../../src/api/Auth.js"
import { Api } from "../../../src/app/Api.js"

/** Which credential an endpoint's definition demands, read from the security middlewares attached to it. */
export type AuthKind = "api-key" | "operator" | "none"

export interface DefinedEndpoint {
  /** `METHOD /path/{}` with every path parameter written `{}`, so parameter names do not matter. */
  readonly key: string
  readonly method: string
  readonly path: string
  readonly group: string
  readonly name: string
  readonly auth: AuthKind
  /** The endpoint's RequiredScope annotation (API-key endpoints: the scope a key needs, or AnyKey). */
  readonly scope: KeyScope | undefined
  /** Names of every middleware that applies (API, group and endpoint level), for messages. */
  readonly middlewares: ReadonlyArray<string>
  /** Whether /openapi.json documents it (false for a group annotated OpenApi.Exclude: the root /log alias). */
  readonly documented: boolean
}

/** `/api/v1/trust/:publicId/machine` → `/api/v1/trust/{}/machine`. */
export const normalisePath = (path: string): string => path.replace(/:[A-Za-z0-9_]+\??/g, "{}").replace(/\{[^}]*\}/g, "{}")

export const endpointKey = (method: string, path: string): string => `${method.toUpperCase()} ${normalisePath(path)}`

/** A middleware as the definition holds it: a service key. */
interface MiddlewareKey {
  readonly key: string
}

const authOf = (middlewares: ReadonlyArray<MiddlewareKey>): AuthKind => {
  const is = (tag: { readonly key: string }) => (m: MiddlewareKey) => (m as unknown) === tag || m.key === tag.key
  const apiKey = middlewares.some(is(ApiKeyAuth))
  const operator = middlewares.some(is(OperatorAuth))
  if (apiKey && operator) throw new Error("an endpoint with both ApiKeyAuth and OperatorAuth")
  return apiKey ? "api-key" : operator ? "operator" : "none"
}

/**
 * Every endpoint of the HttpApi definition the server serves (src/app/Api.ts), with the credential its
 * middlewares demand. Generated, so an endpoint added to the definition shows up here without anyone listing it.
 * In Effect 4, API- and group-level middlewares are copied onto each endpoint when attached, so the
 * endpoint's own set holds every middleware that applies.
 */
export const definedEndpoints = (): ReadonlyArray<DefinedEndpoint> => {
  const api = Api as unknown as {
    readonly groups: Record<string, {
      readonly identifier: string
      readonly annotations: Context.Context<never>
      readonly endpoints: Record<string, {
        readonly identifier: string
        readonly method: string
        readonly path: string
        readonly middlewares: ReadonlySet<MiddlewareKey>
        readonly annotations: Context.Context<never>
      }>
    }>
  }
  const out: Array<DefinedEndpoint> = []
  for (const group of Object.values(api.groups)) {
    for (const endpoint of Object.values(group.endpoints)) {
      const middlewares = [...endpoint.middlewares]
      out.push({
        key: endpointKey(endpoint.method, endpoint.path),
        method: endpoint.method.toUpperCase(),
        path: endpoint.path,
        group: group.identifier,
        name: endpoint.identifier,
        auth: authOf(middlewares),
        scope: Context.getOrUndefined(endpoint.annotations, RequiredScope),
        middlewares: middlewares.map((m) => m.key),
        documented: !Context.get(group.annotations, OpenApi.Exclude)
      })
    }
  }
  return out
}
