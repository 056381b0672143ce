import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.js"
import { requirePublicId } from "../domain/PublicId.js"
import { Determinations } from "./Determinations.js"

export const DeterminationsHttpLive = HttpApiBuilder.group(Api, "determinations", (handlers) =>
  Effect.gen(function*() {
    const determinations = yield* Determinations
    return handlers.handle("put", ({ params, payload }) =>
      requirePublicId(params.publicId).pipe(
        Effect.flatMap((publicId) => determinations.ingest(publicId, payload)),
        Effect.map((result) => HttpServerResponse.jsonUnsafe(result, { status: result.outcome === "created" ? 201 : 200 }))
      ))
  }))
