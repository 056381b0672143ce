import { createReadStream } from "node:fs"
import { createInterface } from "node:readline"
import { Effect, Result, Schema, Stream } from "effect"
import { DeterminationBody } from "../domain/Determination.js"
import { fieldErrorsOf, isProblemError, toProblemDocument } from "../domain/Problem.js"
import { requirePublicId } from "../domain/PublicId.js"
import { Determinations } from "../trust/Determinations.js"

/** One NDJSON line: the PUT body plus the `public_id` it is stored under. */
const ImportLine = Schema.Struct({ public_id: Schema.String, ...DeterminationBody.fields })

export interface ImportSummary {
  readonly created: number
  readonly updated: number
  readonly unchanged: number
  readonly failed: ReadonlyArray<{ readonly line: number; readonly problem: string }>
}

const decodeLine = (raw: unknown) =>
  Schema.decodeUnknownResult(ImportLine)(raw, { onExcessProperty: "error", errors: "all" })

/** Every failing member of a line, as `pointer: message`. */
const problemsOf = (error: Schema.SchemaError): string =>
  fieldErrorsOf(error.issue).map(({ pointer, detail }) => `${pointer}: ${detail}`).join("; ")

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
        if (Result.isFailure(decoded)) {
          summary.failed.push({ line, problem: problemsOf(decoded.failure) })
          return
        }
        const { public_id, ...body } = decoded.success
        // The id is decoded here, at the edge, with the same refusal PUT gives; the service takes a PublicId.
        const result = yield* Effect.result(Effect.flatMap(requirePublicId(public_id), (publicId) => determinations.ingest(publicId, body)))
        if (Result.isFailure(result)) {
          const error = result.failure
          summary.failed.push({ line, problem: isProblemError(error) ? toProblemDocument(error).detail : String(error) })
          return
        }
        summary[result.success.outcome]++
      }))
    return summary as ImportSummary
  })
