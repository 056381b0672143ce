import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Unavailable } from "../domain/Problem.js"

export class SystemApi extends HttpApiGroup.make("system")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz", {
      success: Schema.Struct({ status: Schema.Literal("ok") })
    })
      .annotate(OpenApi.Summary, "Liveness")
      .annotate(OpenApi.Description, "200 while the process serves requests. No authentication; open to browsers.")
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz", {
      success: Schema.Struct({ status: Schema.Literal("ready"), database: Schema.String, migrations: Schema.Int }),
      error: Unavailable
    })
      .annotate(OpenApi.Summary, "Readiness: database reachable and every migration applied")
      .annotate(OpenApi.Description,
        "200 when the database answers and every migration is applied; 503 `unavailable` otherwise, and from the " +
        "moment a stop (SIGTERM) begins. Load balancers should route on this one.")
  )
  .annotate(OpenApi.Title, "System") {}
