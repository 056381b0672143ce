import { mkdirSync, writeFileSync } from "node:fs"
import { dirname } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

/**
 * The page's verifier as one browser module: src/web/browser.ts and everything it imports (src/verify,
 * the `canonicalize` package) bundled by esbuild, not minified, so a relying party can read what runs.
 * `npm run build` writes it beside the other assets in dist (`node --import tsx src/web/Bundle.ts`);
 * run from source (tsx, vitest), Web.ts calls bundleVerifier when the file is first asked for, so
 * nothing built is committed and a fresh clone needs only `npm install`. esbuild is a dev dependency:
 * the compiled service only reads the built file.
 */

/** The bundle's entry, from the source tree (this file is run from source whenever it bundles). */
export const verifierEntry = fileURLToPath(new URL("./browser.ts", import.meta.url))

export const bundleVerifier = async (): Promise<Uint8Array> => {
  const { build } = await import("esbuild")
  const result = await build({
    entryPoints: [verifierEntry],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    charset: "utf8",
    write: false,
    logLevel: "silent"
  })
  const output = result.outputFiles[0]
  if (output === undefined) throw new Error("esbuild produced no output for the page's verifier")
  return output.contents
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const target = fileURLToPath(new URL("../../dist/src/web/assets/verify.js", import.meta.url))
  mkdirSync(dirname(target), { recursive: true })
  writeFileSync(target, await bundleVerifier())
}
