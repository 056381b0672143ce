import { JSONSchema } from "effect"
import { ProblemDocument } from "../domain/Problem.js"

const problemSchema = JSONSchema.make(ProblemDocument)

/**
 * Errors are rendered as problem+json by `Problems.ts`, not by HttpApi's schema encoder, so the
 * generated document is corrected to say so: every 4xx/5xx response is `application/problem+json`
 * with the ProblemDocument schema.
 */
export const problemJsonSpec = (spec: Record<string, any>): Record<string, any> => {
  const components = (spec.components ??= {})
  components.schemas = { ...components.schemas, ProblemDocument: { ...problemSchema, $schema: undefined } }
  delete components.schemas.ProblemDocument.$schema
  for (const pathItem of Object.values<Record<string, any>>(spec.paths ?? {})) {
    for (const operation of Object.values<Record<string, any>>(pathItem)) {
      const responses = operation?.responses as Record<string, any> | undefined
      if (!responses) continue
      for (const [status, response] of Object.entries(responses)) {
        if (Number(status) >= 400) {
          response.content = { "application/problem+json": { schema: { $ref: "#/components/schemas/ProblemDocument" } } }
        }
      }
      for (const status of ["400", "413", "415", "500", "503"]) {
        responses[status] ??= {
          description: "Problem details",
          content: { "application/problem+json": { schema: { $ref: "#/components/schemas/ProblemDocument" } } }
        }
      }
    }
  }
  return spec
}
