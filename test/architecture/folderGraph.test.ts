import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import {
  closureOf,
  folderGraphOf,
  type Import,
  importedBy,
  importsOf,
  layerViolationsOf,
  loopsOf,
  readSources,
  specifiersOf
} from "../support/folderGraph.js"

/**
 * The folders of src/, bottom first (docs/ARCHITECTURE.md, "Modules and the one-way flow"): a folder imports
 * only folders before it in this list, never one at its own level or above, so the folder graph has no loop.
 */
export const LayerOrder = [
  "verify", // the relying party's verifiers: libraries only
  "domain", // schemas, problem classes, pure rules
  "platform", // configuration, database, ids, keys
  "observability", // request records, metrics, tracing
  "api", // the edge's vocabulary: problems, RequestGuard and the security middlewares as declared, a group's HttpApi
  "http", // the edge's plumbing: front door, edge middleware, body guard, group context, route patterns
  "access",
  "log",
  "events",
  "trust",
  "receipts",
  "webhooks",
  "mcp",
  "witness",
  "web",
  "demo",
  "app", // the composition root: the HttpApi of every group, the routes, the server's and the CLI's layers
  "client", // the package's client: derived from app/Api.ts, loads no server code (checked below)
  "cli",
  "." // src/main.ts
] as const

const sources = readSources("src")
const imports = importsOf(sources)
const folders = new Set([...sources.keys()].map((path) => (path.includes("/") ? path.split("/")[0]! : ".")))

describe("the folder graph of src/", () => {
  it("has no loop", () => {
    expect(loopsOf(folderGraphOf(folders, imports)).join("\n")).toBe("")
  })

  it("follows the layer order: a folder imports only folders below it", () => {
    expect(layerViolationsOf(folderGraphOf(folders, imports), LayerOrder).join("\n")).toBe("")
  })

  it("every folder of src/ has its place in the order, and every place a folder", () => {
    expect([...folders].sort()).toEqual([...LayerOrder].sort())
  })

  it("reads every relative import of the sources (each resolves to a file)", () => {
    const missing = imports.filter(({ to }) => !to.startsWith("../") && !sources.has(to) && !to.startsWith("web/assets/"))
    expect(missing).toEqual([])
    expect(imports.length).toBeGreaterThan(500)
  })

  it("the client loads no server code: its files reach only definitions, verifiers and pure modules", () => {
    const clientFiles = [...sources.keys()].filter((path) => path.startsWith("client/"))
    const reached = closureOf(imports, clientFiles)
    const serverFolders = ["platform/", "http/", "observability/", "app/"]
    const serverFiles = [...reached].filter((path) =>
      (serverFolders.some((folder) => path.startsWith(folder)) && path !== "app/Api.ts") ||
      /\/(Http|Repo|Live[A-Za-z]*|.*Live)\.ts$/.test(path)
    )
    expect(serverFiles).toEqual([])
    const serverLibraries = /^(pg|redis|@effect\/sql-pg|@effect\/platform-node.*|@electric-sql\/.*|effect\/sql|node:http|node:net)$/
    const loading = [...reached].flatMap((path) =>
      specifiersOf(sources.get(path) ?? "").filter((specifier) => serverLibraries.test(specifier)).map((s) => `${path} imports ${s}`))
    expect(loading).toEqual([])
  })

  it("`pv`'s offline commands load no barrel module and no settings: every `pv log monitor` start pays for what it loads", () => {
    // What cli/main.ts loads before it knows the command: its static imports (a dynamic import loads a
    // database or server command's modules only when that command runs). The `effect` barrel loads all of
    // Effect (~180 more modules) and platform/Config.ts its Config and Schema: a start took 0.5 CPU-s with
    // them, 0.2 without.
    const staticOnly = new Map([...sources].map(([path, text]) => [path, text.replace(/\bimport\(\s*["'][^"']+["']\s*\)/g, "")]))
    const reached = closureOf(importsOf(staticOnly), ["cli/main.ts"])
    expect([...reached].filter((path) => path === "platform/Config.ts")).toEqual([])
    const barrels = /^(effect|@effect\/platform-node)$/
    const loading = [...reached].flatMap((path) =>
      [...importedBy(sources.get(path) ?? "")].filter(([specifier, { typeOnly }]) => !typeOnly && barrels.test(specifier)).map(([s]) => `${path} imports ${s}`))
    expect(loading).toEqual([])
  })
})

/** Synthetic sources: folder f<i> has one file; an edge a → b is an import of f<b>'s file by f<a>'s. */
const graphOf = (n: number, edges: ReadonlyArray<readonly [number, number]>) => {
  const links: Array<Import> = edges.filter(([a, b]) => a !== b).map(([a, b]) => ({ from: `f${a}/A.ts`, to: `f${b}/B.ts` }))
  return folderGraphOf(Array.from({ length: n }, (_, i) => `f${i}`), links)
}

/** Kahn's algorithm: the graph is acyclic when every node can be removed in topological order. */
const acyclic = (n: number, edges: ReadonlyArray<readonly [number, number]>): boolean => {
  const distinct = [...new Set(edges.filter(([a, b]) => a !== b).map(([a, b]) => `${a}>${b}`))].map((e) => e.split(">").map(Number))
  const indegree = Array.from({ length: n }, () => 0)
  for (const [, b] of distinct) indegree[b!]!++
  const ready = indegree.flatMap((d, i) => (d === 0 ? [i] : []))
  let removed = 0
  while (ready.length > 0) {
    const node = ready.pop()!
    removed++
    for (const [a, b] of distinct) if (a === node && --indegree[b!]! === 0) ready.push(b!)
  }
  return removed === n
}

const edgesArbitrary = (n: number) => fc.array(fc.tuple(fc.nat(n - 1), fc.nat(n - 1)), { maxLength: 3 * n })

describe("the folder graph checker", () => {
  it("reads static, re-exporting, bare and dynamic imports, over lines, and not those in comments", () => {
    const text = [
      `import { a } from "./a.js"`,
      `import type { B } from "../b/B.js"`,
      `import {\n  c,\n  d\n} from "../c/C.js"`,
      `export * from "../d/D.js"`,
      `export { e } from "../e/E.js"`,
      `import "../f/F.js"`,
      `const g = () => import("../g/G.js")`,
      `const h = (name: string) => import(name)`,
      `// import { x } from "../x/X.js"`,
      `/* import { y } from "../y/Y.js" */`,
      `/**\n * import("../z/Z.js") in a doc comment\n */`
    ].join("\n")
    expect(specifiersOf(text)).toEqual(["./a.js", "../b/B.js", "../c/C.js", "../d/D.js", "../e/E.js", "../f/F.js", "../g/G.js"])
  })

  it("resolves relative imports to folders, and ignores libraries and files outside src/", () => {
    const files = new Map([
      ["a/A.ts", `import { b } from "../b/B.js"\nimport { Effect } from "effect"\nimport { m } from "../../migrations/index.js"`],
      ["b/B.ts", `import { x } from "./X.js"`],
      ["main.ts", `import { a } from "./a/A.js"`]
    ])
    files.set("c/C.ts", `import type { A } from "../a/A.js"\nexport type { B } from "../b/B.js"\nimport { type X } from "../x/X.js"`)
    expect(importsOf(files)).toEqual([
      { from: "a/A.ts", to: "b/B.ts" },
      { from: "b/B.ts", to: "b/X.ts" },
      { from: "main.ts", to: "a/A.ts" },
      { from: "c/C.ts", to: "a/A.ts", typeOnly: true },
      { from: "c/C.ts", to: "b/B.ts", typeOnly: true },
      { from: "c/C.ts", to: "x/X.ts" }
    ])
    // Type-only imports are arrows of the folder graph, but load nothing.
    expect(closureOf(importsOf(files), ["c/C.ts"])).toEqual(new Set(["c/C.ts", "x/X.ts"]))
  })

  it("names a loop: its folders, the cycle, and one file-level import per arrow", () => {
    const loops = loopsOf(graphOf(4, [[0, 1], [1, 2], [2, 0], [3, 0]]))
    expect(loops).toEqual([
      "folders {f0, f1, f2} form a loop: f0 → f1 → f2 → f0\n" +
        "  f0 → f1: f0/A.ts imports f1/B.ts\n" +
        "  f1 → f2: f1/A.ts imports f2/B.ts\n" +
        "  f2 → f0: f2/A.ts imports f0/B.ts"
    ])
  })

  it("finds a loop exactly when the graph has a cycle", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 7 }).chain((n) => fc.tuple(fc.constant(n), edgesArbitrary(n))), ([n, edges]) => {
      const loops = loopsOf(graphOf(n, edges))
      expect(loops.length === 0).toBe(acyclic(n, edges))
      // Every arrow a loop names is an edge of the graph.
      for (const line of loops.join("\n").split("\n").filter((l) => l.startsWith("  "))) {
        const [, a, b] = /^ {2}f(\d+) → f(\d+):/.exec(line)!
        expect(edges.some(([x, y]) => x === Number(a) && y === Number(b))).toBe(true)
      }
    }))
  })

  it("refuses exactly the arrows that do not point below, and a folder without a place", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 7 }).chain((n) => fc.tuple(fc.constant(n), edgesArbitrary(n))), ([n, edges]) => {
      // Order: f0 at the bottom, f(n-1) at the top; an edge a → b is allowed when b < a.
      const order = Array.from({ length: n }, (_, i) => `f${i}`)
      const violations = layerViolationsOf(graphOf(n, edges), order)
      const upward = new Set(edges.filter(([a, b]) => a !== b && b > a).map(([a, b]) => `${a}>${b}`))
      expect(violations.length).toBe(upward.size)
      // An order that respects the layers has no loop.
      if (upward.size === 0) expect(loopsOf(graphOf(n, edges))).toEqual([])
    }))
    expect(layerViolationsOf(graphOf(2, [[1, 0]]), ["f1"])).toEqual(["folder f0 has no place in the layer order"])
  })

  it("refuses an import of a folder above; a folder's own files import each other freely", () => {
    expect(layerViolationsOf(graphOf(2, [[0, 1]]), ["f0", "f1"])).toEqual(["f0 (level 0) imports f1 (level 1), which is not below it: f0/A.ts imports f1/B.ts"])
    // A folder's files importing each other is no arrow.
    expect(layerViolationsOf(graphOf(1, [[0, 0]]), ["f0"])).toEqual([])
  })
})
