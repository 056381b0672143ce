import { Context } from "effect"
import { HttpApi, type HttpApiEndpoint } from "effect/http-api"
import { AnyKey, ApiKeyAuth, type KeyScope, RequiredScope } from "../../../src/api/Auth.js"
import { Api } from "../../../src/app/Api.js"
import { Scopes } from "../../../src/domain/ApiKey.js"
import { tools } from "../../../src/mcp/Tools.js"

/**
 * The scope matrix of docs/API.md §3.2, rendered from the definition: each endpoint's `RequiredScope`
 * annotation (read here directly, not through the server's code) and each MCP tool's declared scope.
 */

export interface ScopedEndpoint {
  readonly endpoint: HttpApiEndpoint.Top
  readonly apiKey: boolean
  readonly scope: KeyScope | undefined
}

/** Every endpoint of the definition, whether it sits behind ApiKeyAuth, and its RequiredScope annotation. */
export const scopedEndpoints = (): ReadonlyArray<ScopedEndpoint> => {
  const out: Array<ScopedEndpoint> = []
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, middleware }) =>
      out.push({
        endpoint,
        apiKey: [...middleware].some((m) => m.key === ApiKeyAuth.key),
        scope: Context.getOrUndefined(endpoint.annotations, RequiredScope)
      })
  })
  return out
}

/** `GET /api/v1/trust/:publicId/machine` → `` `GET /trust/{publicId}/machine` `` (the docs' spelling). */
const docPath = (endpoint: HttpApiEndpoint.Top) =>
  `\`${endpoint.method} ${endpoint.path.replace(/^\/api\/v1/, "").replace(/:(\w+)\??/g, "{$1}")}\``

/** The table, one row per scope (in the order of `Scopes`), then any valid key. */
export const renderScopeMatrix = (): string => {
  const rows = [...Scopes, AnyKey].map((scope) => {
    const rest = scopedEndpoints().filter((e) => e.scope === scope).map((e) => docPath(e.endpoint))
    const mcp = tools.filter((tool) => tool.scope === scope).map((tool) => `\`${tool.name}\``)
    const name = scope === AnyKey ? "(any valid key)" : `\`${scope}\``
    return `| ${name} | ${rest.join(", ")} | ${mcp.join(", ")} |`
  })
  return ["| scope | REST operations | MCP tools |", "|---|---|---|", ...rows].join("\n")
}
