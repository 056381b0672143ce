/**
 * The Prometheus text exposition (format 0.0.4) as data, and the merge of several workers' texts into
 * one (PV_WORKERS > 1: one scrape reports every worker). Counters, histograms and summaries' `_sum` and
 * `_count` add up per identical label set; a gauge (a worker's own state: its pools, its memory, its
 * limit) and anything else that does not add up (summary quantiles, untyped samples) is kept per worker,
 * with a `worker` label. Pure: Telemetry.ts gathers the texts.
 */

/** One sample line: `name{labels} value`. `labels` is the text between the braces ("" when none). */
export interface Sample {
  readonly name: string
  readonly labels: string
  readonly value: number
}

/** The samples of one metric name, with its HELP and TYPE. */
export interface Family {
  readonly name: string
  readonly help: string | undefined
  readonly type: string
  readonly samples: ReadonlyArray<Sample>
}

/** Families in the order they first appeared. */
export type Exposition = ReadonlyArray<Family>

/** The sample's label pairs, parsed (values unescaped), in their written order. */
const parseLabels = (block: string): Array<[string, string]> => {
  const pairs: Array<[string, string]> = []
  let i = 0
  while (i < block.length) {
    const eq = block.indexOf("=", i)
    if (eq === -1 || block[eq + 1] !== "\"") throw new Error(`malformed labels: {${block}}`)
    const name = block.slice(i, eq).trim()
    let value = ""
    let j = eq + 2
    for (; j < block.length && block[j] !== "\""; j++) {
      if (block[j] === "\\") {
        j++
        value += block[j] === "n" ? "\n" : block[j]
      } else value += block[j]
    }
    if (j >= block.length) throw new Error(`malformed labels: {${block}}`)
    pairs.push([name, value])
    i = j + 1
    if (block[i] === ",") i++
  }
  return pairs
}

const escapeLabelValue = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")

const formatLabels = (pairs: ReadonlyArray<readonly [string, string]>) =>
  pairs.map(([name, value]) => `${name}="${escapeLabelValue(value)}"`).join(",")

/** The identity of a series: its sample name and its label pairs in a canonical (sorted) order. */
const seriesKey = (sample: Sample) => `${sample.name}{${formatLabels(parseLabels(sample.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))}}`

const parseValue = (text: string): number => {
  if (text === "+Inf") return Number.POSITIVE_INFINITY
  if (text === "-Inf") return Number.NEGATIVE_INFINITY
  if (text === "NaN") return Number.NaN
  const value = Number(text)
  if (text === "" || Number.isNaN(value)) throw new Error(`malformed sample value: ${text}`)
  return value
}

/** As Effect's PrometheusMetrics writes a value. */
const formatValue = (value: number) =>
  Number.isNaN(value) ? "NaN" : value === Number.POSITIVE_INFINITY ? "+Inf" : value === Number.NEGATIVE_INFINITY ? "-Inf" : value.toString()

const samplePattern = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$/

/** The family a sample line belongs to: its own name, or the histogram/summary it is a `_bucket`, `_sum` or `_count` of. */
const familyOf = (name: string, families: ReadonlyMap<string, unknown>) => {
  if (families.has(name)) return name
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (name.endsWith(suffix) && families.has(name.slice(0, -suffix.length))) return name.slice(0, -suffix.length)
  }
  return name
}

export const parseExposition = (text: string): Exposition => {
  const families = new Map<string, { name: string; help: string | undefined; type: string; samples: Array<Sample> }>()
  const family = (name: string) => {
    let found = families.get(name)
    if (found === undefined) families.set(name, found = { name, help: undefined, type: "untyped", samples: [] })
    return found
  }
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue
    if (line.startsWith("#")) {
      const match = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/.exec(line)
      if (match === null) continue
      if (match[1] === "HELP") family(match[2]!).help = match[3] ?? ""
      else family(match[2]!).type = (match[3] ?? "untyped").trim()
      continue
    }
    const match = samplePattern.exec(line)
    if (match === null) throw new Error(`malformed sample line: ${line}`)
    const labels = match[2] ?? ""
    parseLabels(labels)
    family(familyOf(match[1]!, families)).samples.push({ name: match[1]!, labels, value: parseValue(match[3]!) })
  }
  return [...families.values()]
}

export const formatExposition = (exposition: Exposition): string => {
  const lines: Array<string> = []
  for (const family of exposition) {
    if (family.help !== undefined) lines.push(`# HELP ${family.name} ${family.help}`)
    lines.push(`# TYPE ${family.name} ${family.type}`)
    for (const sample of family.samples) {
      lines.push(`${sample.name}${sample.labels === "" ? "" : `{${sample.labels}}`} ${formatValue(sample.value)}`)
    }
  }
  return lines.length === 0 ? "" : lines.join("\n") + "\n"
}

/** True when the sample adds up across workers: counters, histograms, and a summary's `_sum` and `_count`. */
const adds = (family: { readonly name: string; readonly type: string }, sample: Sample) =>
  family.type === "counter" || family.type === "histogram" ||
  (family.type === "summary" && (sample.name === `${family.name}_sum` || sample.name === `${family.name}_count`))

/**
 * One worker's exposition as a part of the cluster's: every sample that does not add up gets the
 * label `worker="<worker>"` (first, replacing one it may already have).
 */
export const labelWorker = (exposition: Exposition, worker: string): Exposition =>
  exposition.map((family) => ({
    ...family,
    samples: family.samples.map((sample) => {
      if (adds(family, sample)) return sample
      const pairs = parseLabels(sample.labels).filter(([name]) => name !== "worker")
      return { ...sample, labels: formatLabels([["worker", worker], ...pairs]) }
    })
  }))

/**
 * Two parts of the cluster's exposition as one: samples of the same series (name and label set, in any
 * label order) that add up are summed; others are kept, the later one winning for the same series (with
 * `worker` labels, series of different workers never coincide). Families and samples keep the order of
 * their first appearance, HELP and TYPE of the first that has them. Associative; `[]` is its identity.
 */
export const combine = (a: Exposition, b: Exposition): Exposition => {
  const families = new Map<string, { name: string; help: string | undefined; type: string; samples: Map<string, Sample> }>()
  for (const part of [a, b]) {
    for (const family of part) {
      let found = families.get(family.name)
      if (found === undefined) {
        families.set(family.name, found = { name: family.name, help: family.help, type: family.type, samples: new Map() })
      } else if (found.help === undefined && family.help !== undefined) found.help = family.help
      for (const sample of family.samples) {
        const key = seriesKey(sample)
        const existing = found.samples.get(key)
        found.samples.set(key, existing !== undefined && adds(found, sample) ? { ...existing, value: existing.value + sample.value } : sample)
      }
    }
  }
  return [...families.values()].map((family) => ({ ...family, samples: [...family.samples.values()] }))
}

/** Every worker's text as one exposition (see `combine`), gauges labelled per worker. */
export const mergeWorkers = (parts: ReadonlyArray<{ readonly worker: string; readonly text: string }>): Exposition =>
  parts.reduce<Exposition>((merged, part) => combine(merged, labelWorker(parseExposition(part.text), part.worker)), [])
