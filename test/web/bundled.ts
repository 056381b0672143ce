import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { bundleVerifier } from "../../src/web/Bundle.js"

/**
 * The page's module as the browser gets it: bundled by src/web/Bundle.ts (what `npm run build` ships
 * and the dev server serves), written to a scratch file and imported here, where Node's WebCrypto
 * (`globalThis.crypto.subtle`, with Ed25519) runs it. Typed by each test's own interface, since the
 * point is to exercise the bundle rather than its sources.
 */
export const importBundledVerifier = async <Module>(): Promise<Module> => {
  const file = join(mkdtempSync(join(tmpdir(), "pv-verify-")), "verify.js")
  writeFileSync(file, await bundleVerifier())
  return (await import(/* @vite-ignore */ pathToFileURL(file).href)) as Module
}
