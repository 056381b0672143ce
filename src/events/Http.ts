import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { requireScope } from "../access/ApiKeys.js"
import { Api } from "../api/Api.js"
import { requirePublicId } from "../domain/PublicId.js"
import { EventLog } from "./EventLog.js"

export const EventsHttpLive = HttpApiBuilder.group(Api, "events", (handlers) =>
  Effect.gen(function*() {
    const log = yield* EventLog
    return handlers
      .handle("list", ({ query }) =>
        requireScope("trust:read").pipe(
          Effect.andThen(requirePublicId(query.public_id)),
          Effect.flatMap((publicId) => log.page(publicId, { after: query.after, limit: query.limit }))
        ))
      .handle("keys", () => log.jwks)
  }))
