import type { HttpApiMiddleware } from "@effect/platform"
import { ApiKeyAuth, OperatorAuth } from "../../../src/access/Auth.js"
import { Api } from "../../../src/http/Api.js"

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
  /** Names of every middleware that applies (API, group and endpoint level), for messages. */
  readonly middlewares: ReadonlyArray<string>
}

/** `/api/v1/trust/:publicId/machine` → `/api/v1/trust/{}/machine`. */
export const normalisePath = (path: string): string => path.replace(/:[A-Za-z0-9_]+\??/g, "{}").replace(/\{[^}]*\}/g, "{}")

export const endpointKey = (method: string, path: string): string => `${method.toUpperCase()} ${normalisePath(path)}`

const authOf = (middlewares: ReadonlyArray<HttpApiMiddleware.TagClassAny>): AuthKind => {
  const is = (tag: { readonly key: string }) => (m: HttpApiMiddleware.TagClassAny) => (m as unknown) === tag || m.key === tag.key
  const apiKey = middlewares.some(is(ApiKeyAuth))
  const operator = middlewares.some(is(OperatorAuth))
  if (apiKey && operator) throw new Error("an endpoint with both ApiKeyAuth and OperatorAuth")
  return apiKey ? "api-key" : operator ? "operator" : "none"
}

/**
 * Every endpoint of the HttpApi definition the server serves (src/http/Api.ts), with the credential its
 * middlewares demand. Generated, so an endpoint added to the definition shows up here without anyone listing it.
 */
export const definedEndpoints = (): ReadonlyArray<DefinedEndpoint> => {
  const api = Api as unknown as {
    readonly groups: Record<string, {
      readonly identifier: string
      readonly middlewares: ReadonlySet<HttpApiMiddleware.TagClassAny>
      readonly endpoints: Record<string, {
        readonly name: string
        readonly method: string
        readonly path: string
        readonly middlewares: ReadonlySet<HttpApiMiddleware.TagClassAny>
      }>
    }>
    readonly middlewares: ReadonlySet<HttpApiMiddleware.TagClassAny>
  }
  const out: Array<DefinedEndpoint> = []
  for (const group of Object.values(api.groups)) {
    for (const endpoint of Object.values(group.endpoints)) {
      const middlewares = [...api.middlewares, ...group.middlewares, ...endpoint.middlewares]
      out.push({
        key: endpointKey(endpoint.method, endpoint.path),
        method: endpoint.method.toUpperCase(),
        path: endpoint.path,
        group: group.identifier,
        name: endpoint.name,
        auth: authOf(middlewares),
        middlewares: middlewares.map((m) => m.key)
      })
    }
  }
  return out
}
