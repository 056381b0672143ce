import { randomFillSync } from "node:crypto"
import { Clock, Context, Effect, Layer } from "effect"
import { encodeTime, ulid } from "ulid"

export type IdPrefix = "key" | "dv" | "rr" | "evt" | "sub" | "att"

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

export interface IdsShape {
  /** A new `<prefix>_<ULID>` stamped with Effect's clock (on every receipt: a plain function, no span). */
  readonly make: (prefix: IdPrefix) => Effect.Effect<string>
}

const makeIds = Effect.sync((): IdsShape => {
  const random = pooledRandom()
  return {
    make: (prefix: IdPrefix): Effect.Effect<string> =>
      Effect.map(Clock.currentTimeMillis, (now) => `${prefix}_${ulid(now, random)}`)
  }
})

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

/** The 16 random characters of a ULID replaced by a counter (base 32, zero-padded): 0…01, 0…02, … */
const counterOf = (n: number): string => {
  let digits = ""
  for (let i = 0; i < 16; i++, n = Math.floor(n / 32)) digits = crockford[n % 32] + digits
  return digits
}

/** Time-ordered identifiers (`<prefix>_<ULID>`), stamped from Effect's clock so tests control them. */
export class Ids extends Context.Service<Ids, IdsShape>()("pv/Ids", { make: makeIds }) {
  static readonly layer: Layer.Layer<Ids> = Layer.effect(this, this.make)

  /**
   * Deterministic ids for service tests: the ULID's time part from Effect's clock (the test's TestClock),
   * its random part the count of ids this instance made, so the n-th id at instant t is always the same.
   */
  static readonly layerTest: Layer.Layer<Ids> = Layer.sync(this, () => {
    let made = 0
    return { make: (prefix: IdPrefix) => Effect.map(Clock.currentTimeMillis, (now) => `${prefix}_${encodeTime(now, 10)}${counterOf(++made)}`) }
  })
}
