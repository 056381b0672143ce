import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { requireScope } from "../access/ApiKeys.js"
import { Api } from "../http/Api.js"
import { EventLog } from "./EventLog.js"

export const EventsHttpLive = HttpApiBuilder.group(Api, "events", (handlers) =>
  Effect.gen(function*() {
    const log = yield* EventLog
    return handlers
      .handle("list", ({ urlParams }) =>
        requireScope("trust:read").pipe(
          Effect.zipRight(log.page(urlParams.public_id, { after: urlParams.after, limit: urlParams.limit }))
        ))
      .handle("keys", () => log.jwks)
  }))
