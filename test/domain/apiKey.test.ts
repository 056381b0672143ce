import { createHash } from "node:crypto"
import { crc32 } from "node:zlib"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Result, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { decodeTime } from "ulid"
import { ApiKeys } from "../../src/access/ApiKeys.js"
import { KeyStore } from "../../src/access/Repo.js"
import type { ApiKeyRecord } from "../../src/domain/ApiKeyRecord.js"
import {
  ApiKeyLength,
  base62Checksum,
  displayPrefix,
  generateApiKey,
  hashApiKey,
  isWellFormedApiKey,
  KeyPrefix
} from "../../src/domain/ApiKey.js"
import { Ids } from "../../src/platform/Ids.js"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const KeyShape = /^pv_live_[0-9A-Za-z]{38}$/
const UlidShape = /^[0-9A-HJKMNP-TV-Z]{26}$/

/** docs/API.md §3.1, computed independently: CRC32 of `pv_live_` + secret, as 6 big-endian base62 digits. */
const expectedChecksum = (body: string): string => {
  let n = BigInt(crc32(Buffer.from(body, "utf8")))
  const digits: Array<string> = []
  for (let i = 0; i < 6; i++) {
    digits.unshift(BASE62[Number(n % 62n)]!)
    n /= 62n
  }
  return digits.join("")
}

const base62Char = fc.constantFrom(...BASE62)
const secret = fc.array(base62Char, { minLength: 32, maxLength: 32 }).map((chars) => chars.join(""))
/** Keys built from arbitrary secrets with the documented checksum: what a valid key looks like. */
const validKey = secret.map((s) => KeyPrefix + s + expectedChecksum(KeyPrefix + s))

/** Every key that differs from `key` in exactly one position, by any base62 character or a few outside it. */
const singleCharacterChanges = function*(key: string) {
  for (let i = 0; i < key.length; i++) {
    for (const c of BASE62 + "_-+/= ") {
      if (c !== key[i]) yield key.slice(0, i) + c + key.slice(i + 1)
    }
  }
}

/** docs/API.md §3.1 as a predicate, written from the documentation and not from the service. */
const documentationSaysValid = (text: string): boolean =>
  KeyShape.test(text) && text.slice(-6) === expectedChecksum(text.slice(0, -6))

interface Candidate {
  readonly label: string
  readonly text: string
  /** What the generator built: a key that satisfies docs/API.md §3.1, or one that must be refused. */
  readonly valid: boolean
}

const withChecksum = (body: string) => body + expectedChecksum(body)
const replaceAt = (text: string, at: number, c: string) => text.slice(0, at) + c + text.slice(at + 1)
/** Characters outside base62 that a careless client or an attacker might put in a key. */
const foreign = fc.oneof(fc.constantFrom("_", "-", "+", "/", "=", " ", "\n", "\u0000", "é", "０", "𝟘"), fc.string({ minLength: 1, maxLength: 1 }))
  .filter((c) => !BASE62.includes(c))
const base62String = (min: number, max: number) => fc.array(base62Char, { minLength: min, maxLength: max }).map((cs) => cs.join(""))

const candidates: ReadonlyArray<readonly [string, fc.Arbitrary<Omit<Candidate, "label">>]> = [
  ["valid", validKey.map((text) => ({ text, valid: true }))],
  ["one character changed to another base62 character", fc.tuple(validKey, fc.nat({ max: ApiKeyLength - 1 }), base62Char)
    .filter(([key, at, c]) => key[at] !== c)
    .map(([key, at, c]) => ({ text: replaceAt(key, at, c), valid: false }))],
  ["one character changed to a character outside base62", fc.tuple(validKey, fc.nat({ max: ApiKeyLength - 1 }), foreign)
    .filter(([key, at, c]) => key[at] !== c) // the prefix has underscores of its own
    .map(([key, at, c]) => ({ text: replaceAt(key, at, c), valid: false }))],
  ["secret with a foreign character, checksum recomputed over it", fc.tuple(secret, fc.nat({ max: 31 }), foreign)
    .map(([s, at, c]) => ({ text: withChecksum(KeyPrefix + replaceAt(s, at, c)), valid: false }))],
  ["wrong checksum", fc.tuple(secret, base62String(6, 6))
    .filter(([s, sum]) => sum !== expectedChecksum(KeyPrefix + s))
    .map(([s, sum]) => ({ text: KeyPrefix + s + sum, valid: false }))],
  ["two neighbouring characters swapped", fc.tuple(validKey, fc.nat({ max: ApiKeyLength - 2 }))
    .filter(([key, at]) => key[at] !== key[at + 1])
    .map(([key, at]) => ({ text: key.slice(0, at) + key[at + 1] + key[at] + key.slice(at + 2), valid: false }))],
  ["secret too short or too long, checksum recomputed", fc.oneof(base62String(0, 31), base62String(33, 40))
    .map((s) => ({ text: withChecksum(KeyPrefix + s), valid: false }))],
  ["valid key truncated or extended", fc.tuple(validKey, fc.integer({ min: -10, max: 10 }).filter((n) => n !== 0), base62String(10, 10))
    .map(([key, n, more]) => ({ text: n < 0 ? key.slice(0, n) : key + more.slice(0, n), valid: false }))],
  ["another prefix, checksum recomputed", fc.tuple(fc.constantFrom("pv_test_", "PV_LIVE_", "pv-live-", "pv_liv_", "pv_live", "pv_live__", "xv_live_", ""), secret)
    .map(([prefix, s]) => ({ text: withChecksum(prefix + s), valid: false }))],
  ["valid key with white space or case changed", fc.tuple(validKey, fc.constantFrom("lead", "trail", "newline", "upper", "lower"))
    .map(([key, how]) => ({
      text: how === "lead" ? ` ${key}` : how === "trail" ? `${key} ` : how === "newline" ? `${key}\n` : how === "upper" ? key.toUpperCase() : key.toLowerCase(),
      valid: false
    }))],
  ["pv_live_ and anything", fc.string({ maxLength: 50 }).map((rest) => ({ text: KeyPrefix + rest, valid: documentationSaysValid(KeyPrefix + rest) }))],
  ["any string", fc.string({ maxLength: 60 }).map((text) => ({ text, valid: documentationSaysValid(text) }))]
]
const candidateLabels = candidates.map(([label]) => label)
const candidate: fc.Arbitrary<Candidate> = fc.oneof(
  ...candidates.map(([label, arbitrary]) => ({
    // Valid keys as often as all near misses of one kind together, so both outcomes are well exercised.
    weight: label === "valid" ? 3 : 1,
    arbitrary: arbitrary.map((c): Candidate => ({ label, ...c }))
  }))
)

describe("API key format", () => {
  it("generates pv_live_ + 32 base62 + a 6-character base62 CRC32 checksum", () => {
    for (let i = 0; i < 200; i++) {
      const key = generateApiKey()
      expect(key).toMatch(KeyShape)
      expect(key).toHaveLength(46)
      expect(ApiKeyLength).toBe(46)
      expect(key.slice(-6)).toBe(expectedChecksum(key.slice(0, -6)))
      expect(isWellFormedApiKey(key)).toBe(true)
    }
  })

  it("draws the secret from all 62 characters and never repeats a key", () => {
    const keys = Array.from({ length: 300 }, generateApiKey)
    expect(new Set(keys).size).toBe(keys.length)
    const seen = new Set(keys.flatMap((key) => [...key.slice(8, 40)]))
    expect([...seen].sort().join("")).toBe([...BASE62].sort().join(""))
  })

  it("computes the checksum docs/API.md §3.1 describes", () => fc.assert(fc.property(secret, (s) => {
    expect(base62Checksum(KeyPrefix + s)).toBe(expectedChecksum(KeyPrefix + s))
  })))

  it("pads small checksums with leading zeros", () => {
    // A CRC32 of 0 must still print as 6 digits.
    expect(base62Checksum("")).toBe("000000")
    expect(base62Checksum("a")).toBe(expectedChecksum("a"))
    expect(base62Checksum("a")).toHaveLength(6)
  })

  it("accepts every key with a correct checksum", () => fc.assert(fc.property(validKey, (key) => {
    expect(isWellFormedApiKey(key)).toBe(true)
  })))

  it("detects every single-character change of a generated key", () => {
    for (let k = 0; k < 5; k++) {
      const key = generateApiKey()
      let variants = 0
      for (const changed of singleCharacterChanges(key)) {
        variants++
        if (isWellFormedApiKey(changed)) throw new Error(`checksum missed a change: ${key} → ${changed}`)
      }
      expect(variants).toBe(46 * 67)
    }
  })

  it("detects a change at any position to any other base62 character", () => fc.assert(fc.property(
    validKey,
    fc.nat({ max: 45 }),
    base62Char, (key, at, c) => {
    fc.pre(key[at] !== c)
    expect(isWellFormedApiKey(key.slice(0, at) + c + key.slice(at + 1))).toBe(false)
  }), { numRuns: 2000 }))

  it("detects two swapped neighbouring characters", () => fc.assert(fc.property(validKey, fc.nat({ max: 44 }), (key, at) => {
    fc.pre(key[at] !== key[at + 1])
    const swapped = key.slice(0, at) + key[at + 1] + key[at] + key.slice(at + 2)
    expect(isWellFormedApiKey(swapped)).toBe(false)
  })))

  it("rejects wrong shapes before looking at the checksum", () => {
    const key = generateApiKey()
    for (const bad of [
      "", "pv_live_", key.slice(0, -1), key + "0", key.replace("pv_live_", "pv_test_"), key.replace("pv_live_", "PV_LIVE_"),
      ` ${key}`, `${key} `, `${key}\n`, key.toUpperCase() === key ? key.toLowerCase() : key.toUpperCase(),
      "pv_live_" + "0".repeat(38), "op_test_0123456789abcdefghijklmnopqrstuvwxyz"
    ]) {
      expect(isWellFormedApiKey(bad), JSON.stringify(bad)).toBe(false)
    }
  })

  it("accepts a candidate exactly when it has the shape and checksum of docs/API.md §3.1", () => fc.assert(fc.property(candidate, (c) => {
    expect(isWellFormedApiKey(c.text), `${c.label}: ${JSON.stringify(c.text)}`).toBe(c.valid)
    // The generator's own claim agrees with the documented rule computed independently.
    expect(documentationSaysValid(c.text)).toBe(c.valid)
  }), { numRuns: 3000 }))

  it("generates valid keys and every kind of near miss (fixed seed)", () => {
    const sample = fc.sample(candidate, { numRuns: 3_000, seed: 46 })
    expect(new Set(sample.map((c) => c.label))).toEqual(new Set(candidateLabels))
    expect(sample.filter((c) => c.valid).length).toBeGreaterThan(300)
    expect(sample.filter((c) => !c.valid && c.text.startsWith(KeyPrefix)).length).toBeGreaterThan(1000)
    expect(sample.filter((c) => !c.valid && c.text.length === ApiKeyLength).length).toBeGreaterThan(500)
  })

  it("shows the first 12 characters as the key prefix", () => {
    const key = generateApiKey()
    expect(displayPrefix(key)).toBe(key.slice(0, 12))
    expect(displayPrefix(key).startsWith("pv_live_")).toBe(true)
  })
})

describe("API key hashing", () => {
  it("is SHA-256 as lowercase hex", () => {
    // FIPS 180-2 test vector.
    expect(hashApiKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  })

  it("hashes the full key and nothing else", () => fc.assert(fc.property(validKey, (key) => {
    const hash = hashApiKey(key)
    expect(hash).toMatch(/^[0-9a-f]{64}$/)
    expect(hash).toBe(createHash("sha256").update(key, "utf8").digest("hex"))
    expect(hash).toBe(hashApiKey(key))
    expect(hash).not.toContain(key.slice(8, 40))
  })))

  it("gives different keys different hashes", () => fc.assert(fc.property(validKey, validKey, (a, b) => {
    fc.pre(a !== b)
    expect(hashApiKey(a)).not.toBe(hashApiKey(b))
  })))
})

/** The key store in memory, counting lookups, so the service runs without a database. */
const memoryKeyStore = () => {
  const rows = new Map<string, ApiKeyRecord>()
  const lookups: Array<string> = []
  const layer = Layer.succeed(KeyStore, KeyStore.of({
    findByHash: (keyHash: string) => Effect.sync(() => (lookups.push(keyHash), Option.fromNullishOr(rows.get(keyHash)))),
    insert: (record: ApiKeyRecord) => Effect.sync(() => void rows.set(record.key_hash, record)),
    list: (tenantId: Option.Option<string>) =>
      Effect.sync(() => [...rows.values()].filter((r) => Option.isNone(tenantId) || r.tenant_id === tenantId.value)),
    revoke: (keyId: string, at: Date) => Effect.sync(() => {
      const found = [...rows.values()].find((r) => r.key_id === keyId)
      if (found === undefined) return Option.none()
      rows.set(found.key_hash, { ...found, revoked_at: found.revoked_at ?? at.toISOString() })
      return Option.some(found.key_hash)
    }),
    touch: () => Effect.void
  }))
  return { rows, lookups, layer: ApiKeys.layerNoDeps.pipe(Layer.provide(layer), Layer.provide(Ids.layer)) }
}

const T0 = Date.parse("2030-01-01T00:00:00.000Z")

/**
 * Runs `body` against an ApiKeys service built on the test clock at T0. The clock is set before the service
 * starts: its periodic usage flush sleeps on the test clock, and jumping decades past a running schedule
 * would replay every tick.
 */
const atT0 = <A, E>(store: ReturnType<typeof memoryKeyStore>, body: Effect.Effect<A, E, ApiKeys>) =>
  Effect.andThen(TestClock.setTime(T0), Effect.provide(body, store.layer))

describe("ApiKeys service (test clock, in-memory store)", () => {
  it.effect("stamps created_at and the key_id ULID from the clock and stores only the hash", () => {
    const store = memoryKeyStore()
    return atT0(store, Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create({ tenant_id: "t1", name: "k", scopes: ["trust:read"] })
      expect(created.created_at).toBe("2030-01-01T00:00:00.000Z")
      expect(created.key_id.startsWith("key_")).toBe(true)
      expect(created.key_id.slice(4)).toMatch(UlidShape)
      expect(decodeTime(created.key_id.slice(4))).toBe(T0)
      expect(created.rate_limit_per_minute).toBe(600)
      expect(created.daily_quota).toBe(100_000)
      expect(created.expires_at).toBeNull()
      expect(created.key_prefix).toBe(created.api_key.slice(0, 12))
      expect(isWellFormedApiKey(created.api_key)).toBe(true)

      yield* TestClock.adjust("90 minutes")
      const later = yield* keys.create({ tenant_id: "t1", name: "k2", scopes: ["trust:read"] })
      expect(later.created_at).toBe("2030-01-01T01:30:00.000Z")
      expect(decodeTime(later.key_id.slice(4))).toBe(T0 + 90 * 60_000)
      expect(later.key_id > created.key_id).toBe(true)

      const stored = [...store.rows.values()]
      expect(stored.map((r) => r.key_hash).sort()).toEqual([hashApiKey(created.api_key), hashApiKey(later.api_key)].sort())
      expect(JSON.stringify(stored)).not.toContain(created.api_key.slice(8, 40))
      expect(JSON.stringify(stored)).not.toContain(later.api_key.slice(8, 40))
    }))
  })

  it.effect("refuses an expires_at that is not in the future", () => {
    const store = memoryKeyStore()
    return atT0(store, Effect.gen(function*() {
      const keys = yield* ApiKeys
      for (const expires_at of ["2029-12-31T23:59:59.999Z", "2030-01-01T00:00:00.000Z"]) {
        const result = yield* Effect.result(keys.create({ tenant_id: "t1", name: "k", scopes: ["trust:read"], expires_at }))
        expect(Result.isFailure(result)).toBe(true)
        if (Result.isFailure(result)) {
          expect(result.failure._tag).toBe("ValidationFailed")
          expect(result.failure.errors?.map((e) => e.pointer)).toEqual(["/expires_at"])
        }
      }
      expect(store.rows.size).toBe(0)
    }))
  })

  it.effect("authenticates a key until it expires, and not after", () => {
    const store = memoryKeyStore()
    return atT0(store, Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create({
        tenant_id: "t1", name: "k", scopes: ["trust:read"], expires_at: new Date(T0 + 5_000).toISOString()
      })
      const first = yield* keys.authenticate(created.api_key)
      expect(first.key_id).toBe(created.key_id)
      yield* TestClock.adjust("4999 millis")
      expect((yield* keys.authenticate(created.api_key)).key_id).toBe(created.key_id)
      yield* TestClock.adjust("2 millis")
      const expired = yield* Effect.flip(keys.authenticate(created.api_key))
      expect(expired._tag).toBe("Unauthorized")
    }))
  })

  it.effect("stops authenticating a key as soon as it is revoked", () => {
    const store = memoryKeyStore()
    return atT0(store, Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create({ tenant_id: "t1", name: "k", scopes: ["trust:read"] })
      yield* keys.authenticate(created.api_key)
      yield* TestClock.adjust("10 seconds")
      yield* keys.revoke(created.key_id)
      expect(store.rows.get(hashApiKey(created.api_key))?.revoked_at).toBe(new Date(T0 + 10_000).toISOString())
      expect((yield* Effect.flip(keys.authenticate(created.api_key)))._tag).toBe("Unauthorized")
      expect((yield* Effect.flip(keys.revoke("key_01ARZ3NDEKTSV4RRFFQ69G5FAV")))._tag).toBe("NotFound")
    }))
  })

  it.effect("rejects malformed keys and bad checksums without a store lookup", () => {
    const store = memoryKeyStore()
    return atT0(store, Effect.gen(function*() {
      const keys = yield* ApiKeys
      const created = yield* keys.create({ tenant_id: "t1", name: "k", scopes: ["trust:read"] })
      const last = created.api_key.at(-1)!
      const badChecksum = created.api_key.slice(0, -1) + (last === "0" ? "1" : "0")
      for (const token of ["", "nope", badChecksum, created.api_key.slice(0, -1), created.api_key + "x"]) {
        expect((yield* Effect.flip(keys.authenticate(token)))._tag).toBe("Unauthorized")
      }
      expect(store.lookups).toEqual([])
      const unknown = generateApiKey()
      expect((yield* Effect.flip(keys.authenticate(unknown)))._tag).toBe("Unauthorized")
      expect(store.lookups).toEqual([hashApiKey(unknown)])
    }))
  })
})
