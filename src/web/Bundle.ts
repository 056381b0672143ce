import { mkdirSync, writeFileSync } from "node:fs"
import { dirname } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

/**
 * The page's two browser modules, bundled by esbuild, not minified, so a relying party can read what runs:
 * - /web/verify.js: src/web/browser.ts and everything it imports (src/verify, the `canonicalize` package);
 * - /web/app.js: src/web/app.ts, the page itself, which imports the verifier at run time as `./verify.js`
 *   (its imports of ./browser.js are left to the browser), so the checks exist once and tests import them alone.
 * `npm run build` writes both beside the other assets in dist (`node --import tsx src/web/Bundle.ts`); run
 * from source (tsx, vitest), Web.ts bundles each when it is first asked for, so nothing built is committed
 * and a fresh clone needs only `npm install`. esbuild is a dev dependency: the compiled service only reads
 * the built files.
 */

/** The bundles' entries, from the source tree (this file is run from source whenever it bundles). */
export const verifierEntry = fileURLToPath(new URL("./browser.ts", import.meta.url))
export const appEntry = fileURLToPath(new URL("./app.ts", import.meta.url))

/** Each bundle by the name the page asks for it. */
export const bundleNames = { "verify.js": verifierEntry, "app.js": appEntry } as const
export type BundleName = keyof typeof bundleNames

export const bundle = async (name: BundleName): Promise<Uint8Array> => {
  const { build } = await import("esbuild")
  const result = await build({
    entryPoints: [bundleNames[name]],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    charset: "utf8",
    write: false,
    logLevel: "silent",
    plugins: name === "app.js"
      ? [{
        name: "verifier-at-run-time",
        setup: (plugin) => plugin.onResolve({ filter: /^\.\/browser\.js$/ }, () => ({ path: "./verify.js", external: true }))
      }]
      : []
  })
  const output = result.outputFiles[0]
  if (output === undefined) throw new Error(`esbuild produced no output for the page's ${name}`)
  return output.contents
}

export const bundleVerifier = () => bundle("verify.js")

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const name of Object.keys(bundleNames) as Array<BundleName>) {
    const target = fileURLToPath(new URL(`../../dist/src/web/assets/${name}`, import.meta.url))
    mkdirSync(dirname(target), { recursive: true })
    writeFileSync(target, await bundle(name))
  }
}
