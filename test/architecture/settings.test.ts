import { describe, expect, it } from "@effect/vitest"
import { readSources } from "../support/folderGraph.js"

/**
 * Every setting is read through Effect's `Config` (platform/Config.ts, docs/ARCHITECTURE.md "Configuration"), so
 * a bad value is refused naming its variable, never silently defaulted, and tests bring their own provider.
 * The only direct reads of the environment, by `file:what`, with why.
 */
const Allowed: ReadonlyMap<string, string> = new Map([
  ["app/Launch.ts:ConfigProvider.fromEnv()", "launchSettingsFromEnv: the launch's settings through the same Config definitions as AppConfig, before any layer exists"]
])

/** Block comments, and line comments that start a line or follow code, are not code (they may name process.env). */
const withoutComments = (text: string): string =>
  text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1")

const EnvReads: ReadonlyArray<readonly [string, RegExp]> = [
  ["process.env", /\bprocess\s*(?:\.\s*env\b|\[\s*["'`]env["'`]\s*\])/],
  ["{ env } = process", /\{[^}]*\benv\b[^}]*\}\s*=\s*(?:globalThis\.)?process\b/],
  ["ConfigProvider.fromEnv()", /\bConfigProvider\.fromEnv\(\s*\)/]
]

/** Each direct environment read of the sources, as `file:what`. */
const envReadsOf = (sources: ReadonlyMap<string, string>): Array<string> =>
  [...sources].flatMap(([path, text]) => {
    const code = withoutComments(text)
    return EnvReads.filter(([, pattern]) => pattern.test(code)).map(([what]) => `${path}:${what}`)
  })

describe("settings in src/", () => {
  it("are read through Config: no direct read of the environment but the ones allowed", () => {
    expect(envReadsOf(readSources("src")).filter((read) => !Allowed.has(read))).toEqual([])
  })

  it("keeps no allowance for a read that is gone", () => {
    const reads = new Set(envReadsOf(readSources("src")))
    expect([...Allowed.keys()].filter((read) => !reads.has(read))).toEqual([])
  })

  it("finds each form of a direct read, and not a mention in a comment or an explicit provider", () => {
    const probe = (code: string) => envReadsOf(new Map([["probe.ts", code]]))
    expect(probe("const port = process.env.PORT")).toEqual(["probe.ts:process.env"])
    expect(probe("const port = process[\"env\"][\"PORT\"]")).toEqual(["probe.ts:process.env"])
    expect(probe("const { env } = process")).toEqual(["probe.ts:{ env } = process"])
    expect(probe("const read = ConfigProvider.fromEnv()")).toEqual(["probe.ts:ConfigProvider.fromEnv()"])
    expect(probe("// process.env is never read here\n/* process.env */ const a = 1 // nor process.env")).toEqual([])
    expect(probe("const read = ConfigProvider.fromEnv({ env })")).toEqual([])
  })
})
