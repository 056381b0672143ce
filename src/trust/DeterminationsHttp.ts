import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { groupApi } from "../api/GroupApi.js"
import { jsonTextEncoder } from "../domain/Json.js"
import { requirePublicId } from "../domain/PublicId.js"
import { Determinations } from "./Determinations.js"
import { DeterminationsApi, IngestResultSchema } from "./DeterminationsApi.js"

/**
 * The body goes through the declared success schema; the handler answers itself only because its two
 * successes (200, 201) share that schema, and HttpApi would pick the first for both.
 */
const resultJson = jsonTextEncoder(IngestResultSchema)

export const DeterminationsHttpLive = HttpApiBuilder.group(groupApi(DeterminationsApi), "determinations", (handlers) =>
  Effect.gen(function*() {
    const determinations = yield* Determinations
    return handlers.handle("put", ({ params, payload }) =>
      requirePublicId(params.publicId).pipe(
        Effect.flatMap((publicId) => determinations.ingest(publicId, payload)),
        Effect.map((result) =>
          HttpServerResponse.text(resultJson(result), { status: result.outcome === "created" ? 201 : 200, contentType: "application/json" }))
      ))
  }))
