// Positions in the bundled service (dist/src/main.js, dist/src/cli/main.js and their chunks: scripts/bundleService.ts)
// as the files they came from, through the source map beside each, so the profilers name `src/…` and `effect/…` as
// before the bundle instead of one chunk for both. Node's own SourceMap reads the maps.
import { existsSync, readFileSync } from "node:fs"
import { SourceMap } from "node:module"
import { fileURLToPath, pathToFileURL } from "node:url"

export interface Position {
  readonly url: string
  /** 0-based, as V8's profiles count. */
  readonly line: number
  readonly column: number
}

const maps = new Map<string, SourceMap | undefined>()

const mapOf = (url: string): SourceMap | undefined => {
  if (maps.has(url)) return maps.get(url)
  let map: SourceMap | undefined
  try {
    const file = fileURLToPath(url)
    if (existsSync(`${file}.map`)) map = new SourceMap(JSON.parse(readFileSync(`${file}.map`, "utf8")))
  } catch {
    map = undefined
  }
  maps.set(url, map)
  return map
}

/** Where a position of a bundled file came from (a `file:` URL); any other position as it is. */
export const originalOf = (position: Position): Position => {
  if (!position.url.startsWith("file:") || !/\/dist\/src\/(?:.*\/)?(?:main|chunk-[^/]*)\.js$/.test(position.url)) return position
  const entry = mapOf(position.url)?.findEntry(position.line, position.column)
  if (entry === undefined || !("originalSource" in entry)) return position
  const source = new URL(entry.originalSource, position.url)
  return { url: pathToFileURL(fileURLToPath(source)).href, line: entry.originalLine, column: entry.originalColumn }
}

/** A perf symbol of V8's (`JS:*name file:///…/dist/src/chunk-X.js:12:5`, 1-based) with its position in the original file. */
export const originalSymbol = (symbol: string): string => {
  const match = /^(.* )(file:\/\/\S+):(\d+):(\d+)$/.exec(symbol)
  if (match === null) return symbol
  const original = originalOf({ url: match[2]!, line: Number(match[3]) - 1, column: Math.max(0, Number(match[4]) - 1) })
  return original.url === match[2] ? symbol : `${match[1]}${original.url}:${original.line + 1}:${original.column + 1}`
}

/** A frame's file as the profilers print it: `effect/…` (a package's, after node_modules/), `src/…`, `bench/…`, `node:…`. */
export const shortPath = (url: string): string => {
  const modules = url.lastIndexOf("/node_modules/")
  if (modules !== -1) return url.slice(modules + "/node_modules/".length)
  return url.replace(/^.*\/(?:dist\/)?(src|bench)\//, "$1/")
}
