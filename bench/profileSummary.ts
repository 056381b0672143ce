// The summary of a V8 CPU profile (.cpuprofile) that both profiling scripts print: self time by package and by
// function, and inclusive time of the service's own functions.
import { readFileSync } from "node:fs"
import { originalOf, shortPath } from "./sourceMapped.js"

interface ProfileNode { id: number; children?: Array<number>; callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number } }
interface Profile { nodes: Array<ProfileNode>; samples: Array<number>; timeDeltas: Array<number> }

/** A profile with the bundled service's frames at their places in the original files (bench/sourceMapped.ts). */
const readProfile = (file: string): Profile => {
  const profile = JSON.parse(readFileSync(file, "utf8")) as Profile
  for (const node of profile.nodes) {
    const { url, lineNumber, columnNumber } = node.callFrame
    const original = originalOf({ url, line: lineNumber, column: columnNumber })
    node.callFrame = { ...node.callFrame, url: original.url, lineNumber: original.line, columnNumber: original.column }
  }
  return profile
}

export const summarise = (file: string): string => {
  const profile = readProfile(file)
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<string, number>()
  const byPackage = new Map<string, number>()
  let total = 0
  profile.samples.forEach((id, i) => {
    const node = nodes.get(id)!
    const t = profile.timeDeltas[i] ?? 0
    total += t
    const url = shortPath(node.callFrame.url)
    const where = url === "" ? "(native/runtime)" : url.split("/").slice(0, url.startsWith("@") ? 2 : url.startsWith("src/") ? 2 : 1).join("/")
    const key = `${node.callFrame.functionName || "(anonymous)"} ${url}:${node.callFrame.lineNumber}`
    self.set(key, (self.get(key) ?? 0) + t)
    byPackage.set(where, (byPackage.get(where) ?? 0) + t)
  })
  const top = (m: Map<string, number>, n: number) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, t]) => `  ${(100 * t / total).toFixed(1).padStart(5)}%  ${k}`).join("\n")
  // Inclusive time of the service's own functions (each counted once per sample), against all non-idle time.
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const inclusive = new Map<string, number>()
  let busy = 0
  profile.samples.forEach((id, i) => {
    const t = profile.timeDeltas[i] ?? 0
    if (nodes.get(id)!.callFrame.functionName === "(idle)") return
    busy += t
    const seen = new Set<string>()
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const f = nodes.get(at)!.callFrame
      if (!/\/(src|effect|platform-node)\//.test(f.url) && !f.url.startsWith("node:_http")) continue
      const key = `${f.functionName || "(anonymous)"} ${shortPath(f.url)}:${f.lineNumber}`
      if (seen.has(key)) continue
      seen.add(key)
      inclusive.set(key, (inclusive.get(key) ?? 0) + t)
    }
  })
  const topBusy = (m: Map<string, number>, n: number) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, t]) => `  ${(100 * t / busy).toFixed(1).padStart(5)}%  ${k}`).join("\n")
  return `by package:\n${top(byPackage, 20)}\nby function:\n${top(self, 60)}\ninclusive, of busy time:\n${topBusy(inclusive, 90)}`
}

/**
 * Busy time of a profile split into named steps: each sample goes to the first step (in `steps`' order) whose
 * pattern matches a frame on its stack (`function url:line`), innermost frames first for native leaves such as
 * (garbage collector); samples no step claims are "other". Returns µs per `per` (e.g. per answer), by step.
 */
export const stepsOf = (file: string, steps: ReadonlyArray<readonly [string, RegExp]>, per: number): Array<[string, number]> => {
  const profile = readProfile(file)
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const label = (n: ProfileNode) => `${n.callFrame.functionName || "(anonymous)"} ${shortPath(n.callFrame.url)}:${n.callFrame.lineNumber}`
  const totals = new Map<string, number>(steps.map(([name]) => [name, 0]))
  totals.set("other", 0)
  profile.samples.forEach((id, i) => {
    const t = profile.timeDeltas[i] ?? 0
    const leaf = nodes.get(id)!
    if (leaf.callFrame.functionName === "(idle)") return
    const stack: Array<string> = []
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) stack.push(label(nodes.get(at)!))
    const step = steps.find(([, pattern]) => stack.some((frame) => pattern.test(frame)))?.[0] ?? "other"
    totals.set(step, totals.get(step)! + t)
  })
  return [...totals].map(([name, t]) => [name, t / per])
}
