import { JSONSchema } from "effect"
import { ProblemDocument } from "../domain/Problem.js"

const problemRef = { $ref: "#/components/schemas/ProblemDocument" }
const problemContent = { "application/problem+json": { schema: problemRef } }

/** JSON Schema `$defs` references rewritten to where OpenAPI keeps schemas. */
const rehome = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(rehome)
  if (typeof value !== "object" || value === null) return value
  return Object.fromEntries(Object.entries(value).map(([k, v]) =>
    [k, k === "$ref" && typeof v === "string" ? v.replace("#/$defs/", "#/components/schemas/") : rehome(v)]))
}

const problemDefinitions = (): Record<string, unknown> => {
  const { $defs } = JSONSchema.make(ProblemDocument) as { $defs?: Record<string, unknown> }
  return rehome($defs ?? {}) as Record<string, unknown>
}

/**
 * Errors are rendered as problem+json by `Problems.ts`, not by HttpApi's schema encoder, so the
 * generated document is corrected to say so: every 4xx/5xx response is `application/problem+json`
 * with the ProblemDocument schema, and the 400/413/415/500/503 answers of the body guard are listed.
 */
export const problemJsonSpec = (spec: Record<string, any>): Record<string, any> => {
  const components = (spec.components ??= {})
  components.schemas = { ...problemDefinitions(), ...components.schemas }
  for (const pathItem of Object.values<Record<string, any>>(spec.paths ?? {})) {
    for (const operation of Object.values<Record<string, any>>(pathItem)) {
      const responses = operation?.responses as Record<string, any> | undefined
      if (!responses) continue
      for (const [status, response] of Object.entries(responses)) {
        if (Number(status) >= 400) response.content = problemContent
      }
      for (const status of ["400", "413", "415", "500", "503"]) {
        responses[status] ??= { description: "Problem details", content: problemContent }
      }
    }
  }
  return spec
}
