import { Clock, Effect, Layer } from "effect"
import { ulid } from "ulid"

/** Time-ordered identifiers (`<prefix>_<ULID>`), stamped from Effect's clock so tests control them. */
export class Ids extends Effect.Service<Ids>()("pv/Ids", {
  succeed: {
    make: (prefix: "key" | "dv" | "rr" | "evt" | "sub") =>
      Effect.map(Clock.currentTimeMillis, (now) => `${prefix}_${ulid(now)}`)
  }
}) {}

export const IdsLive: Layer.Layer<Ids> = Ids.Default
