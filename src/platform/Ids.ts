import { randomFillSync } from "node:crypto"
import { Clock, Context, Effect, Layer } from "effect"
import { ulid } from "ulid"

export type IdPrefix = "key" | "dv" | "rr" | "evt" | "sub"

/**
 * CSPRNG bytes drawn 4 KiB at a time (ulid's default asks the OS once per character, 16 times an id).
 * Each byte / 256 picks one of 32 characters without bias, as 256 is a multiple of 32. The buffer belongs
 * to the service instance that made it.
 */
const pooledRandom = (): (() => number) => {
  const pool = Buffer.alloc(4096)
  let offset = pool.length
  return () => {
    if (offset >= pool.length) {
      randomFillSync(pool)
      offset = 0
    }
    return pool[offset++]! / 256
  }
}

const makeIds = Effect.sync(() => {
  const random = pooledRandom()
  return {
    make: (prefix: IdPrefix): Effect.Effect<string> =>
      Effect.map(Clock.currentTimeMillis, (now) => `${prefix}_${ulid(now, random)}`)
  }
})

/** Time-ordered identifiers (`<prefix>_<ULID>`), stamped from Effect's clock so tests control them. */
export class Ids extends Context.Service<Ids, Effect.Success<typeof makeIds>>()("pv/Ids", { make: makeIds }) {
  static readonly layer: Layer.Layer<Ids> = Layer.effect(this, this.make)
}
