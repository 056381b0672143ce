import { randomFillSync } from "node:crypto"
import { Clock, Effect } from "effect"
import { ulid } from "ulid"

const pool = Buffer.alloc(4096)
let offset = pool.length

/**
 * CSPRNG bytes drawn 4 KiB at a time (ulid's default asks the OS once per character, 16 times an id).
 * Each byte / 256 picks one of 32 characters without bias, as 256 is a multiple of 32.
 */
const pooledRandom = (): number => {
  if (offset >= pool.length) {
    randomFillSync(pool)
    offset = 0
  }
  return pool[offset++]! / 256
}

/** Time-ordered identifiers (`<prefix>_<ULID>`), stamped from Effect's clock so tests control them. */
export class Ids extends Effect.Service<Ids>()("pv/Ids", {
  succeed: {
    make: (prefix: "key" | "dv" | "rr" | "evt" | "sub") =>
      Effect.map(Clock.currentTimeMillis, (now) => `${prefix}_${ulid(now, pooledRandom)}`)
  }
}) {}

