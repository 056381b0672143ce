import { createReadStream } from "node:fs"
import { createInterface } from "node:readline"
import { Effect, Either, ParseResult, Schema, Stream } from "effect"
import { DeterminationBody } from "../domain/Determination.js"
import { isProblemError, toProblemDocument } from "../domain/Problem.js"
import { toPointer } from "../http/Problems.js"
import { Determinations } from "../trust/Determinations.js"

/** One NDJSON line: the PUT body plus the `public_id` it is stored under. */
const ImportLine = Schema.extend(
  Schema.Struct({ public_id: Schema.String }),
  DeterminationBody
).annotations({ parseOptions: { onExcessProperty: "error", errors: "all" } })

export interface ImportSummary {
  readonly created: number
  readonly updated: number
  readonly unchanged: number
  readonly failed: ReadonlyArray<{ readonly line: number; readonly problem: string }>
}

const decodeLine = Schema.decodeUnknownEither(ImportLine)

/**
 * `pv import file.ndjson`: every line goes through `Determinations.ingest`, the same path as
 * PUT /api/v1/determinations/{publicId}; a bad line is reported with its number and skipped.
 */
export const importDeterminations = (file: string) =>
  Effect.gen(function*() {
    const determinations = yield* Determinations
    const lines = Stream.fromAsyncIterable(
      createInterface({ input: createReadStream(file, "utf8"), crlfDelay: Infinity }),
      (e) => new Error(`cannot read ${file}: ${String(e)}`)
    )
    const summary = { created: 0, updated: 0, unchanged: 0, failed: [] as Array<{ line: number; problem: string }> }
    let lineNumber = 0
    yield* Stream.runForEach(lines, (text) =>
      Effect.gen(function*() {
        lineNumber++
        const line = lineNumber
        if (text.trim() === "") return
        let raw: unknown
        try {
          raw = JSON.parse(text)
        } catch {
          summary.failed.push({ line, problem: "not valid JSON" })
          return
        }
        const decoded = decodeLine(raw)
        if (Either.isLeft(decoded)) {
          const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
          summary.failed.push({ line, problem: issues.map((i) => `${toPointer(i.path)}: ${i.message}`).join("; ") })
          return
        }
        const { public_id, ...body } = decoded.right
        const result = yield* Effect.either(determinations.ingest(public_id, body))
        if (Either.isLeft(result)) {
          const error = result.left
          summary.failed.push({ line, problem: isProblemError(error) ? toProblemDocument(error).detail : String(error) })
          return
        }
        summary[result.right.outcome]++
      }))
    return summary as ImportSummary
  })
