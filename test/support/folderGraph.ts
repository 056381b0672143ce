import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"

/**
 * The folder graph of src/: a folder is the first path segment under src/ (files directly in src/ are
 * the folder "."), and folder A imports folder B when one of A's files imports one of B's. Read from the
 * import statements (static `import … from`, `export … from`, `import "…"`, and `import("…")` with a
 * literal), so type-only imports count too: they couple the folders as much for a reader.
 */

/** One file-level import: `from` and `to` are paths relative to src/ (`.ts`). */
export interface Import {
  readonly from: string
  readonly to: string
  /** `import type …` / `export type …`: erased from the JavaScript, so it loads nothing at run time. */
  readonly typeOnly?: true
}

const staticImport = /^[ \t]*(?:import|export)\b[^;"'`]*?\bfrom\s*["']([^"']+)["']/gm
const bareImport = /^[ \t]*import\s*["']([^"']+)["']/gm
const dynamicImport = /\bimport\(\s*["']([^"']+)["']\s*\)/g

/** Block comments, and line comments that start a line, are not code (they may quote an import). */
const withoutComments = (text: string): string =>
  text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^[ \t]*\/\/.*$/gm, "")

/** The module specifiers a TypeScript source imports, each once, with whether every import of it is type-only. */
export const importedBy = (text: string): Map<string, { readonly typeOnly: boolean }> => {
  const code = withoutComments(text)
  const found = new Map<string, { typeOnly: boolean }>()
  for (const pattern of [staticImport, bareImport, dynamicImport]) {
    for (const match of code.matchAll(pattern)) {
      const typeOnly = /^\s*(?:import|export)\s+type\s/.test(match[0])
      const held = found.get(match[1]!)
      found.set(match[1]!, { typeOnly: typeOnly && (held?.typeOnly ?? true) })
    }
  }
  return found
}

/** The module specifiers a TypeScript source imports, each once. */
export const specifiersOf = (text: string): Array<string> => [...importedBy(text).keys()]

/** The folder of a path relative to src/. */
export const folderOf = (path: string): string => {
  const parts = path.split("/")
  return parts.length > 1 ? parts[0]! : "."
}

/** The imports among a set of files (`path` relative to src/ → its text) that stay inside src/. */
export const importsOf = (files: ReadonlyMap<string, string>): Array<Import> => {
  const imports: Array<Import> = []
  for (const [from, text] of files) {
    for (const [specifier, { typeOnly }] of importedBy(text)) {
      if (!specifier.startsWith(".")) continue
      const target = join(dirname(from), specifier).split(sep).join("/").replace(/\.js$/, ".ts")
      if (target.startsWith("..")) continue
      imports.push(typeOnly ? { from, to: target, typeOnly } : { from, to: target })
    }
  }
  return imports
}

/** Folder → folder → one file-level import that makes the arrow (the first found). */
export type FolderGraph = Map<string, Map<string, Import>>

export const folderGraphOf = (folders: Iterable<string>, imports: ReadonlyArray<Import>): FolderGraph => {
  const graph: FolderGraph = new Map()
  for (const folder of folders) graph.set(folder, new Map())
  for (const link of imports) {
    const [a, b] = [folderOf(link.from), folderOf(link.to)]
    if (a === b) continue
    if (!graph.has(a)) graph.set(a, new Map())
    if (!graph.has(b)) graph.set(b, new Map())
    const arrows = graph.get(a)!
    if (!arrows.has(b)) arrows.set(b, link)
  }
  return graph
}

/** Strongly connected components (Tarjan), each sorted; only those of more than one folder are loops. */
export const stronglyConnected = (graph: FolderGraph): Array<Array<string>> => {
  let counter = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const components: Array<Array<string>> = []
  const visit = (node: string) => {
    index.set(node, counter)
    low.set(node, counter)
    counter++
    stack.push(node)
    onStack.add(node)
    for (const next of graph.get(node)?.keys() ?? []) {
      if (!index.has(next)) {
        visit(next)
        low.set(node, Math.min(low.get(node)!, low.get(next)!))
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!))
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: Array<string> = []
      let member: string
      do {
        member = stack.pop()!
        onStack.delete(member)
        component.push(member)
      } while (member !== node)
      components.push(component.sort())
    }
  }
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node)
  return components
}

/** One cycle through `start` inside `component` (breadth-first, so a shortest one), as folders. */
const cycleThrough = (graph: FolderGraph, component: ReadonlyArray<string>, start: string): Array<string> => {
  const inside = new Set(component)
  const previous = new Map<string, string>()
  const queue = [start]
  while (queue.length > 0) {
    const node = queue.shift()!
    for (const next of [...(graph.get(node)?.keys() ?? [])].sort()) {
      if (!inside.has(next)) continue
      if (next === start) {
        const path = [node]
        while (path[0] !== start) path.unshift(previous.get(path[0]!)!)
        return [...path, start]
      }
      if (!previous.has(next) && next !== start) {
        previous.set(next, node)
        queue.push(next)
      }
    }
  }
  return [start]
}

/** Every loop of the folder graph, each named by one cycle and one file-level import per arrow. */
export const loopsOf = (graph: FolderGraph): Array<string> =>
  stronglyConnected(graph)
    .filter((component) => component.length > 1)
    .map((component) => {
      const cycle = cycleThrough(graph, component, component[0]!)
      const arrows = cycle.slice(1).map((to, i) => {
        const link = graph.get(cycle[i]!)!.get(to)!
        return `  ${cycle[i]} → ${to}: ${link.from} imports ${link.to}`
      })
      return `folders {${component.join(", ")}} form a loop: ${cycle.join(" → ")}\n${arrows.join("\n")}`
    })

/**
 * The arrows against the declared order (bottom first): a folder may import only folders below it; a
 * folder that is not in the order is named too, so a new folder must be given its place.
 */
export const layerViolationsOf = (graph: FolderGraph, order: ReadonlyArray<string>): Array<string> => {
  const level = new Map(order.map((folder, i) => [folder, i]))
  const violations: Array<string> = []
  for (const folder of [...graph.keys()].sort()) {
    if (!level.has(folder)) violations.push(`folder ${folder} has no place in the layer order`)
  }
  for (const [a, arrows] of [...graph].sort(([x], [y]) => x.localeCompare(y))) {
    for (const [b, link] of [...arrows].sort(([x], [y]) => x.localeCompare(y))) {
      const [la, lb] = [level.get(a), level.get(b)]
      if (la !== undefined && lb !== undefined && lb >= la) {
        violations.push(`${a} (level ${la}) imports ${b} (level ${lb}), which is not below it: ${link.from} imports ${link.to}`)
      }
    }
  }
  return violations
}

/** Every `.ts` file under `root` (src/), by its path relative to `root` with `/` separators. */
export const readSources = (root: string): Map<string, string> => {
  const files = new Map<string, string>()
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.name.endsWith(".ts")) files.set(relative(root, path).split(sep).join("/"), readFileSync(path, "utf8"))
    }
  }
  walk(resolve(root))
  return files
}

/** The files `start` loads at run time through imports (itself included): type-only imports load nothing. */
export const closureOf = (imports: ReadonlyArray<Import>, start: Iterable<string>): Set<string> => {
  const next = new Map<string, Array<string>>()
  for (const { from, to, typeOnly } of imports) if (!typeOnly) next.set(from, [...(next.get(from) ?? []), to])
  const seen = new Set<string>()
  const queue = [...start]
  while (queue.length > 0) {
    const file = queue.pop()!
    if (seen.has(file)) continue
    seen.add(file)
    queue.push(...(next.get(file) ?? []))
  }
  return seen
}
