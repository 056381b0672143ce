import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

export const projectRoot = fileURLToPath(new URL("../..", import.meta.url))

/** The package name and the address the examples of docs/CLIENT.md are written against. */
export const packageSpecifier = "pv-trust-service/client"
export const docBaseUrl = "http://127.0.0.1:8080"

export interface DocExample {
  readonly name: string
  readonly code: string
  /** 1-based line of the opening fence in docs/CLIENT.md. */
  readonly line: number
}

/**
 * The runnable examples of docs/CLIENT.md: each ```ts block right after a `<!-- example: NAME -->` line. Every ts
 * block must have one (so an example cannot be added without being run), and names are unique.
 */
export const docExamples = (text = readFileSync(join(projectRoot, "docs", "CLIENT.md"), "utf8")): ReadonlyArray<DocExample> => {
  const lines = text.split("\n")
  const examples: Array<DocExample> = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(ts|typescript)\s*$/.test(lines[i]!)) continue
    const marker = /^<!-- example: ([a-z0-9-]+) -->$/.exec(lines[i - 1] ?? "")
    if (marker === null) throw new Error(`docs/CLIENT.md:${i + 1}: a \`\`\`ts block without an <!-- example: NAME --> line before it`)
    const end = lines.findIndex((line, j) => j > i && line.startsWith("```"))
    if (end < 0) throw new Error(`docs/CLIENT.md:${i + 1}: unclosed code block`)
    if (examples.some((example) => example.name === marker[1])) throw new Error(`docs/CLIENT.md:${i}: duplicate example ${marker[1]}`)
    examples.push({ name: marker[1]!, code: lines.slice(i + 1, end).join("\n") + "\n", line: i + 1 })
    i = end
  }
  return examples
}
