// Writes test/support/durations.json (read by test/support/LongestFirstSequencer.ts) from vitest's cache after a
// whole run (`npm test`): each file's duration in seconds, the longest of its runs outside the fault projects
// (which have groups of their own). A file that failed keeps its earlier figure: a failure's duration says
// nothing of the file's length.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"

const cache = new URL("../node_modules/.vite/vitest/", import.meta.url)
const table = new URL("../test/support/durations.json", import.meta.url)
const durations = JSON.parse(readFileSync(table, "utf8"))
const measured = {}
for (const dir of existsSync(cache) ? readdirSync(cache) : []) {
  const results = new URL(`${dir}/results.json`, cache)
  if (!existsSync(results)) continue
  for (const [project, { files }] of Object.entries(JSON.parse(readFileSync(results, "utf8")).projects ?? {})) {
    if (project.startsWith("faults")) continue
    for (const [file, { failed, duration }] of Object.entries(files)) {
      if (!failed && duration !== undefined) measured[file] = Math.max(measured[file] ?? 0, Math.round(duration / 1000))
    }
  }
}
// Only files this checkout has (the cache in node_modules may be shared with other checkouts).
const merged = Object.entries({ ...durations, ...measured })
  .filter(([file]) => existsSync(new URL(`../${file}`, import.meta.url)))
  .sort(([, a], [, b]) => b - a)
writeFileSync(table, `{\n${merged.map(([file, seconds]) => `${JSON.stringify(file)}: ${seconds}`).join(",\n")}\n}\n`)
console.log(`test/support/durations.json: ${Object.keys(measured).length} files measured, ${merged.length} in all`)
