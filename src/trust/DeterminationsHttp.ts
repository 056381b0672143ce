import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../http/Api.js"
import { Determinations } from "./Determinations.js"

export const DeterminationsHttpLive = HttpApiBuilder.group(Api, "determinations", (handlers) =>
  Effect.gen(function*() {
    const determinations = yield* Determinations
    return handlers.handle("put", ({ path, payload }) =>
      determinations.ingest(path.publicId, payload).pipe(
        Effect.map((result) => HttpServerResponse.unsafeJson(result, { status: result.outcome === "created" ? 201 : 200 }))
      ))
  }))
