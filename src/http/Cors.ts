/**
 * The browser rules of docs/API.md §3.6, as data: which endpoints any origin may read (`*`), which only the
 * allowed origins may call (with `Vary: Origin`), and the preflight answers. Applied by the edge middleware
 * (http/Edge.ts); `HttpRouter.cors` cannot say them (docs/ARCHITECTURE.md, "The HTTP edge").
 */

/**
 * Endpoints a browser may read from any origin: they carry no credential, so CORS `*` exposes nothing that
 * a plain GET would not. Everything else is credentialed.
 */
export const isOpenToBrowsers = (path: string): boolean =>
  path === "/" || path.startsWith("/web/") || path === "/healthz" || path === "/readyz" || path === "/openapi.json" || path === "/docs" ||
  path === "/api/v1/events/keys" || path.startsWith("/log/") || path.startsWith("/api/v1/log/") ||
  (path.startsWith("/api/v1/trust/") && path.endsWith("/human"))

const exposedHeaders = "ETag, Retry-After, RateLimit, RateLimit-Policy, X-Request-Id, WWW-Authenticate"
const allowedRequestHeaders = "Authorization, Content-Type, If-None-Match, MCP-Protocol-Version, X-Request-Id, Accept"

/** What a request with an `Origin` header gets. */
export type OriginOutcome =
  /** Answered at once: a preflight (204 with these headers). */
  | { readonly _tag: "Preflight"; readonly headers: Readonly<Record<string, string>> }
  /** Answered at once: 403 `origin-not-allowed` (with `Vary: Origin`). */
  | { readonly _tag: "Refused" }
  /** Served, with these headers on the answer. */
  | { readonly _tag: "Allowed"; readonly headers: Readonly<Record<string, string>> }

const openPreflight: OriginOutcome = {
  _tag: "Preflight",
  headers: {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "GET, HEAD",
    "access-control-allow-headers": allowedRequestHeaders,
    "access-control-max-age": "600"
  }
}
const openAllowed: OriginOutcome = {
  _tag: "Allowed",
  headers: { "access-control-allow-origin": "*", "access-control-expose-headers": exposedHeaders }
}
const refused: OriginOutcome = { _tag: "Refused" }

/**
 * The rule for a request from browser `origin` to `path` (its query removed). A preflight is an OPTIONS
 * request with `Access-Control-Request-Method`; any other OPTIONS request is routed like any request.
 */
export const originOutcome = (
  allowed: ReadonlySet<string>,
  method: string,
  path: string,
  origin: string,
  requestMethod: string | undefined
): OriginOutcome => {
  const preflight = method === "OPTIONS" && requestMethod !== undefined
  if (isOpenToBrowsers(path)) return preflight ? openPreflight : openAllowed
  if (!allowed.has(origin)) return refused
  return preflight
    ? {
      _tag: "Preflight",
      headers: {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": "GET, POST, PUT, DELETE",
        "access-control-allow-headers": allowedRequestHeaders,
        "access-control-max-age": "600",
        vary: "Origin"
      }
    }
    : { _tag: "Allowed", headers: { "access-control-allow-origin": origin, "access-control-expose-headers": exposedHeaders, vary: "Origin" } }
}
