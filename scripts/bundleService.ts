// The service's two entry points bundled by esbuild over what tsc wrote (`npm run build`, its last step):
// dist/src/main.js (`npm start`) and dist/src/cli/main.js (`pv`), with the code they share, and the modules they
// import dynamically, in chunks beside them (dist/src/chunk-*.js). A start then reads and compiles a few files
// instead of resolving and loading 587 modules, effect's among them: a PostgreSQL start's CPU 0.90 → 0.47 s
// (docs/PERFORMANCE.md, "A start reads 24 files"). The rest of dist/ stays tsc's output: the client package and its types.
//
// Left outside the bundles, loaded from node_modules as before: PGlite and its socket server (they find their
// WebAssembly beside themselves), and the build tools the from-source paths import (esbuild, typescript).
//
// Each bundled module keeps its own `import.meta.url`, the URL of its file in tsc's output, so the files it reads
// beside itself (the page's assets, the policy) are found as they are unbundled.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"
import { build, type Plugin } from "esbuild"

const root = fileURLToPath(new URL("..", import.meta.url))
const outdir = join(root, "dist", "src")

const external = ["@electric-sql/pglite", "@electric-sql/pglite-socket", "esbuild", "typescript"]

/** In every output file's banner: the URL of dist/src/, from where that file lies (set below, file by file). */
const srcRootMark = "__PV_SRC_ROOT__"

/** `import.meta.url` in a source under src/ becomes the URL of that source's compiled file under dist/src/. */
const ownModuleUrl: Plugin = {
  name: "own-import-meta-url",
  setup: (plugin) =>
    plugin.onLoad({ filter: /\.ts$/ }, (args) => {
      // Only the service's own sources (a package's `src/` is not ours).
      if (!args.path.startsWith(join(root, "src") + sep)) return undefined
      const text = readFileSync(args.path, "utf8")
      if (!text.includes("import.meta.url")) return undefined
      const compiled = relative(join(root, "src"), args.path).split(sep).join("/").replace(/\.ts$/, ".js")
      return { contents: text.replaceAll("import.meta.url", `new URL(${JSON.stringify(compiled)}, __pvSrcRoot).href`), loader: "ts" }
    })
}

/**
 * effect's HttpApiScalar and HttpApiSwagger import their page scripts (3.2 and 1.9 MB) dynamically, so a bundle
 * split in chunks would carry both even though the service never calls them: GET /docs reads the Scalar script from
 * effect's own file (app/Docs.ts). Here they are a module that fails if it is ever loaded.
 */
const withoutPageScripts: Plugin = {
  name: "without-effect-page-scripts",
  setup: (plugin) => {
    plugin.onResolve({ filter: /^\.\/internal\/httpApi(Scalar|Swagger)\.js$/ }, (args) =>
      args.importer.includes(`${sep}effect${sep}dist${sep}http-api${sep}`) ? { path: args.path, namespace: "page-script" } : undefined)
    plugin.onLoad({ filter: /.*/, namespace: "page-script" }, (args) => ({
      contents: `throw new Error(${JSON.stringify(`effect/http-api/${args.path.slice(2)} is left out of the bundle (scripts/bundleService.ts)`)})`,
      loader: "js"
    }))
  }
}

const result = await build({
  entryPoints: [join(root, "src", "main.ts"), join(root, "src", "cli", "main.ts")],
  outdir,
  outbase: join(root, "src"),
  bundle: true,
  splitting: true,
  chunkNames: "chunk-[hash]",
  platform: "node",
  format: "esm",
  target: "node22",
  external,
  banner: {
    js: [
      // The CommonJS packages bundled in call `require` for Node's own modules.
      "import { createRequire as __pvCreateRequire } from \"node:module\";",
      "const require = __pvCreateRequire(import.meta.url);",
      `const __pvSrcRoot = new URL("${srcRootMark}", import.meta.url);`
    ].join("\n")
  },
  // A map beside each file, for `node --enable-source-maps` in a checkout (stack traces in terms of src/); the
  // package leaves the maps out, as it leaves out src/ (package.json, "files").
  sourcemap: "linked",
  sourcesContent: false,
  write: false,
  logLevel: "warning",
  plugins: [ownModuleUrl, withoutPageScripts]
})

// The chunks of an earlier build go (their names are hashes of their contents).
for (const name of readdirSync(outdir)) if (/^chunk-.*\.js(\.map)?$/.test(name)) rmSync(join(outdir, name))
for (const file of result.outputFiles) {
  mkdirSync(dirname(file.path), { recursive: true })
  if (!file.path.endsWith(".js")) {
    writeFileSync(file.path, file.contents)
    continue
  }
  const up = relative(dirname(file.path), outdir).split(sep).join("/")
  writeFileSync(file.path, file.text.replace(srcRootMark, up === "" ? "./" : `${up}/`))
}
