import { readFile } from "node:fs/promises"
import { Effect } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { OpenApi } from "effect/http-api"
import { Api } from "./Api.js"
import { scalarScriptModule } from "../domain/EffectInternals.js"

/**
 * GET /docs: the Scalar API reference, byte for byte the page `HttpApiScalar.layer(Api)` serves, without
 * what that layer costs every process. It imports Scalar's script (3 MB, held by V8 as a 6 MB string) when
 * the router is built, whether anyone reads the docs or not, and V8 keeps the module's source beside it (6 MB
 * more); the first request then builds the page (the script again, and the OpenAPI document) and keeps
 * it. That was ~12 MB of every worker's heap from the start and ~20 MB after one look at the docs.
 *
 * Here nothing is loaded until the first request; it reads the script from the same module file, as text
 * (its one string literal is JSON: checked, else the module is imported as before), builds the page once
 * and keeps only its UTF-8 bytes (~3.3 MB, outside the V8 heap). The strings it built on the way are garbage.
 */
const ScalarModule = scalarScriptModule()

/** The script `HttpApiScalar.layer` inlines: the module's `javascript` export, read without importing the module. */
const scalarScript = async (): Promise<string> => {
  const text = await readFile(ScalarModule, "utf8")
  const marker = "export const javascript="
  const start = text.indexOf(marker)
  const end = text.lastIndexOf("\";")
  if (start !== -1 && end > start) {
    try {
      const value: unknown = JSON.parse(text.slice(start + marker.length, end + 1))
      if (typeof value === "string") return value
    } catch {
      // Not plain JSON in this version of effect: import it as HttpApiScalar does.
    }
  }
  const module = (await import(ScalarModule.href)) as { readonly javascript: string }
  return module.javascript
}

// effect's http-api/internal/html.js, which the page's template uses.
const escapeJson = (value: unknown) =>
  JSON.stringify(value).replace(/</g, "\\u003c").replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"))
const escape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
const escapeAttribute = (text: string) => escape(text).replace(/"/g, "&quot;").replace(/'/g, "&#39;")

/** The page of `HttpApiScalar.layer(api)` with the bundled script (effect's http-api/HttpApiScalar.js, `makeHandler`). */
export const docsPage = (script: string): string => {
  const spec = OpenApi.fromApi(Api)
  const description = spec.info.description
  return `<!doctype html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>${escape(spec.info.title)}</title>
    ${!description ? "" : `<meta name="description" content="${escapeAttribute(description)}"/>`}
    ${!description ? "" : `<meta name="og:description" content="${escapeAttribute(description)}"/>`}
    <meta
      name="viewport"
      content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <div id="api-reference-container"></div>
    <script>${script}</script>
    <script>
      window.Scalar.createApiReference(document.getElementById('api-reference-container'), {
        ...${escapeJson({ _integration: "html" })},
        content: ${escapeJson(spec)}
      })
    </script>
  </body>
</html>`
}

/** Mounts GET /docs on the router (outside the OpenAPI document, as HttpApiScalar.layer did). */
export const DocsLive = HttpRouter.use((router) => {
  // Built on the first request and kept by this layer (a failed build is tried again by the next request).
  let page: Promise<Uint8Array> | undefined
  const pageBytes = () =>
    (page ??= scalarScript().then(
      (script): Uint8Array => Buffer.from(docsPage(script), "utf8"),
      (error: unknown) => {
        page = undefined
        throw error
      }
    ))
  return router.add(
    "GET",
    "/docs",
    Effect.map(Effect.promise(pageBytes), (body) => HttpServerResponse.uint8Array(body, { contentType: "text/html" }))
  )
})
