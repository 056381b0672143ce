import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"

/**
 * The page for people at `/` (issue 13 item 5): static files from `src/web/assets` (copied beside the
 * compiled server by `npm run build`), read once at start. Verification runs in the browser
 * (/web/verify.js, bundled from src/web/browser.ts: the client module's own verifiers; /web/app.js from src/web/app.ts), so the page
 * calls only the service's own open endpoints, or the event feed with a key the visitor types in.
 */
export const assetsDir = fileURLToPath(new URL("./assets/", import.meta.url))

/** Route → file and media type. Only these files are served; nothing else under the directory is reachable. */
export const pageFiles: ReadonlyArray<readonly [route: string, file: string, contentType: string]> = [
  ["/", "index.html", "text/html; charset=utf-8"],
  ["/web/app.js", "app.js", "text/javascript; charset=utf-8"],
  ["/web/verify.js", "verify.js", "text/javascript; charset=utf-8"],
  ["/web/style.css", "style.css", "text/css; charset=utf-8"],
  ["/web/icon.svg", "icon.svg", "image/svg+xml"]
]

/**
 * Same origin only, no inline script or style, and Trusted Types with no policy: the page builds its
 * DOM with textContent, so nothing a pasted document holds can ever become markup or script.
 */
export const contentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'"
].join("; ")

const securityHeaders = {
  "content-security-policy": contentSecurityPolicy,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
  "x-frame-options": "DENY"
}

interface Asset {
  readonly body: Uint8Array
  readonly contentType: string
  readonly etag: string
}

const assetOf = (body: Uint8Array, contentType: string): Asset =>
  ({ body, contentType, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"` })

const loadAsset = (file: string, contentType: string): Asset => {
  let body: Buffer
  try {
    body = readFileSync(assetsDir + file)
  } catch (error) {
    throw new Error(`the page's file ${assetsDir}${file} is missing (npm run build copies src/web/assets and bundles verify.js and app.js): ${String(error)}`)
  }
  return assetOf(body, contentType)
}

/** The bundles the build writes into dist (src/web/Bundle.ts); absent from the source tree, where the server is run by tsx or vitest. */
const BundledFiles: ReadonlySet<string> = new Set(["verify.js", "app.js"])

const fromSource = import.meta.url.endsWith(".ts")

/** Run from source, a bundle is made in memory on its first request (once per router), not at every start. */
const bundledFromSource = (file: string, contentType: string): Effect.Effect<Asset> => {
  let made: Promise<Asset> | undefined
  return Effect.promise(() => (made ??= import("./Bundle.js").then(async (b) => assetOf(await b.bundle(file as "verify.js" | "app.js"), contentType))))
}

/** `no-cache`: a browser keeps the file but asks every time; an unchanged file costs a 304 (ETag). */
const respond = (load: Effect.Effect<Asset>) =>
  Effect.gen(function*() {
    const asset = yield* load
    const request = yield* HttpServerRequest.HttpServerRequest
    const headers = { ...securityHeaders, "cache-control": "no-cache", etag: asset.etag }
    const ifNoneMatch = request.headers["if-none-match"]
    if (ifNoneMatch !== undefined && ifNoneMatch.split(",").some((tag) => tag.trim().replace(/^W\//, "") === asset.etag)) {
      return HttpServerResponse.empty({ status: 304, headers })
    }
    return HttpServerResponse.uint8Array(asset.body, { contentType: asset.contentType, headers })
  })

/** Mounts the page's routes on the router (beside the HttpApi and /docs), outside the OpenAPI document. */
export const WebLive = HttpRouter.use((router) =>
  Effect.gen(function*() {
    for (const [route, file, contentType] of pageFiles) {
      const asset = fromSource && BundledFiles.has(file)
        ? bundledFromSource(file, contentType)
        : Effect.succeed(yield* Effect.sync(() => loadAsset(file, contentType)))
      yield* router.add("GET", route as HttpRouter.PathInput, respond(asset))
    }
  })
)
