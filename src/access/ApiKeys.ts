import { Clock, Context, Duration, Effect, Layer, Option, Schedule } from "effect"
import {
  type ApiKeyRecord,
  type ApiKeyView,
  type CreateApiKeyRequest,
  type CreatedApiKey,
  DefaultDailyQuota,
  DefaultRateLimitPerMinute
} from "../domain/ApiKeyRecord.js"
import { displayPrefix, generateApiKey, hashApiKey, isWellFormedApiKey, type Scope } from "../domain/ApiKey.js"
import { FieldError, InsufficientScope, NotFound, Unauthorized, ValidationFailed } from "../domain/Problem.js"
import { Ids } from "../platform/Ids.js"
import { Caller } from "../api/Auth.js"
import { KeyStore } from "./Repo.js"

/** Revocation and expiry reach every instance within this bound (docs/API.md §3.1: 2 s). */
export const KeyCacheTtl = Duration.seconds(1)

/** How stale last_used_at may be. */
export const UsageFlushInterval = Duration.seconds(30)

export const toView = ({ key_hash: _, ...view }: ApiKeyRecord): ApiKeyView => view

const invalidKey = new Unauthorized({ detail: "The API key is missing, invalid, revoked or expired." })

/** The authenticated API key of the current request (defined with the middleware that provides it). */
export { Caller }

export const hasScope = (key: ApiKeyRecord, scope: Scope): boolean => key.scopes.includes(scope)

/**
 * The insufficient-scope problem (docs/API.md §3.2) of a key without `scope`, or undefined when it has it:
 * for ApiKeyAuth (an endpoint's RequiredScope, access/AuthLive.ts) and for each MCP tool's scope.
 */
export const scopeRefusal = (key: ApiKeyRecord, scope: Scope): InsufficientScope | undefined =>
  hasScope(key, scope) ? undefined : new InsufficientScope({ detail: `This operation requires the scope ${scope}.`, scope })

/**
 * The methods of `ApiKeys`. `authenticate` and `markUsedUnsafe` run on every request with a key (a cache
 * hit answers without a round trip): plain functions with no span; key management is `Effect.fn`s.
 */
export interface ApiKeysShape {
  /** A new key: shown once, stored as its SHA-256 only. */
  readonly create: (request: CreateApiKeyRequest) => Effect.Effect<CreatedApiKey, ValidationFailed>
  /** Every key (or one tenant's), never the key or its hash. */
  readonly list: (tenantId: Option.Option<string>) => Effect.Effect<Array<ApiKeyView>>
  readonly revoke: (keyId: string) => Effect.Effect<void, NotFound>
  /**
   * The active key a bearer token names, or 401 (missing, malformed, unknown, revoked, expired). `keyHash`: the
   * token's `hashApiKey`, when the caller has it already (it must be this token's: it is what is looked up).
   */
  readonly authenticate: (token: string, keyHash?: string) => Effect.Effect<ApiKeyRecord, Unauthorized>
  /**
   * `authenticate`'s answer at `now`, for a token of hash `keyHash` (`hashApiKey`), when it needs no wait: the
   * active key whose record was seen within the cache's TTL (the usual request). Undefined otherwise, also for
   * a cached record that is revoked or expired: `authenticate` decides those, with the failure throttling
   * around it (AuthLive.ts).
   */
  readonly authenticatedNow: (keyHash: string, now: number) => ApiKeyRecord | undefined
  readonly markUsed: (keyId: string) => Effect.Effect<void>
  /** Notes the key's use (flushed to last_used_at every UsageFlushInterval). */
  readonly markUsedUnsafe: (keyId: string) => void
  readonly flushUsage: Effect.Effect<void>
}

const makeApiKeys = Effect.gen(function*() {
  const store = yield* KeyStore
  const ids = yield* Ids
  // Verification never waits on the database for a key seen within the last second (found or not).
  const ttlMs = Duration.toMillis(KeyCacheTtl)
  const known = new Map<string, { readonly key: Option.Option<ApiKeyRecord>; readonly at: number }>()
  /** The cache's record of `keyHash` when it was seen within the TTL before `now`. */
  const cachedAt = (keyHash: string, now: number) => {
    const hit = known.get(keyHash)
    return hit !== undefined && hit.at <= now && now - hit.at < ttlMs ? hit : undefined
  }
  const byHash = {
    get: (keyHash: string) =>
      Effect.clockWith((clock) => {
        const now = clock.currentTimeMillisUnsafe()
        const hit = cachedAt(keyHash, now)
        if (hit !== undefined) return Effect.succeed(hit.key)
        return Effect.orDie(store.findByHash(keyHash)).pipe(
          Effect.tap((key) =>
            Effect.sync(() => {
              if (known.size >= 100_000) known.delete(known.keys().next().value!)
              known.set(keyHash, { key, at: now })
            }))
        )
      }),
    invalidate: (keyHash: string) => Effect.sync(() => void known.delete(keyHash))
  }

  const create = Effect.fn("ApiKeys.create")((request: CreateApiKeyRequest) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (request.expires_at !== undefined && Date.parse(request.expires_at) <= now) {
        return yield* Effect.fail(new ValidationFailed({
          detail: "The request body failed validation.",
          // FieldError instances: the TaggedError constructor validates and rejects plain objects (a 500).
          errors: [new FieldError({ pointer: "/expires_at", detail: "must be in the future" })]
        }))
      }
      const apiKey = generateApiKey()
      const record: ApiKeyRecord = {
        key_id: yield* ids.make("key"),
        key_hash: hashApiKey(apiKey),
        key_prefix: displayPrefix(apiKey),
        tenant_id: request.tenant_id,
        name: request.name,
        scopes: [...request.scopes],
        rate_limit_per_minute: request.rate_limit_per_minute ?? DefaultRateLimitPerMinute,
        daily_quota: request.daily_quota ?? DefaultDailyQuota,
        created_at: new Date(now).toISOString(),
        expires_at: request.expires_at ?? null,
        revoked_at: null,
        last_used_at: null
      }
      yield* Effect.orDie(store.insert(record))
      yield* byHash.invalidate(record.key_hash)
      const { revoked_at: _r, last_used_at: _l, key_hash: _h, ...shown } = record
      return { ...shown, api_key: apiKey } satisfies CreatedApiKey
    }))

  const list = Effect.fn("ApiKeys.list")((tenantId: Option.Option<string>) =>
    Effect.map(Effect.orDie(store.list(tenantId)), (records) => records.map(toView)))

  const revoke = Effect.fn("ApiKeys.revoke")((keyId: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const revoked = yield* Effect.orDie(store.revoke(keyId, new Date(now)))
      if (Option.isNone(revoked)) return yield* Effect.fail(new NotFound({ detail: `no API key ${keyId}` }))
      yield* byHash.invalidate(revoked.value)
    }))

  /** Revocation and expiry of a found record at `now`: the record when it is active. */
  const activeAt = (found: Option.Option<ApiKeyRecord>, now: number): ApiKeyRecord | undefined => {
    if (Option.isNone(found)) return undefined
    const key = found.value
    const expired = key.expires_at !== null && Date.parse(key.expires_at) <= now
    return key.revoked_at !== null || expired ? undefined : key
  }
  const judge = (found: Option.Option<ApiKeyRecord>, now: number): Effect.Effect<ApiKeyRecord, Unauthorized> => {
    const key = activeAt(found, now)
    return key === undefined ? Effect.fail(invalidKey) : Effect.succeed(key)
  }
  /**
   * The cached record (only well-formed keys get there), else shape and checksum (no database) and the
   * store; then revocation and expiry. A record seen within the TTL is judged at once, with one clock
   * reading (the usual case).
   */
  const authenticate = (token: string, keyHash = hashApiKey(token)): Effect.Effect<ApiKeyRecord, Unauthorized> =>
    Effect.clockWith((clock) => {
      const now = clock.currentTimeMillisUnsafe()
      const hit = cachedAt(keyHash, now)
      // Only well-formed keys are ever looked up, so only their hashes are cached: a hit needs no shape check.
      if (hit !== undefined) return judge(hit.key, now)
      if (!isWellFormedApiKey(token)) return Effect.fail(invalidKey)
      return Effect.flatMap(byHash.get(keyHash), (found) => Effect.clockWith((later) => judge(found, later.currentTimeMillisUnsafe())))
    })

  const authenticatedNow = (keyHash: string, now: number): ApiKeyRecord | undefined => {
    const hit = cachedAt(keyHash, now)
    return hit === undefined ? undefined : activeAt(hit.key, now)
  }

  // last_used_at is kept roughly current (to the flush interval) without a write per request.
  const usedSince = new Set<string>()
  const markUsedUnsafe = (keyId: string): void => void usedSince.add(keyId)
  const markUsed = (keyId: string) => Effect.sync(() => markUsedUnsafe(keyId))
  const flushUsage = Effect.gen(function*() {
    if (usedSince.size === 0) return
    const ids = [...usedSince]
    usedSince.clear()
    const now = yield* Clock.currentTimeMillis
    yield* store.touch(ids, new Date(now))
  }).pipe(Effect.catchCause((cause) => Effect.logWarning("could not record key usage", cause)), Effect.withSpan("ApiKeys.flushUsage"))
  yield* flushUsage.pipe(Effect.repeat(Schedule.spaced(UsageFlushInterval)), Effect.forkScoped)
  yield* Effect.addFinalizer(() => flushUsage)

  return { create, list, revoke, authenticate, authenticatedNow, markUsed, markUsedUnsafe, flushUsage } satisfies ApiKeysShape
})

export class ApiKeys extends Context.Service<ApiKeys, ApiKeysShape>()("pv/ApiKeys", {
  make: makeApiKeys
}) {
  static readonly layerNoDeps = Layer.effect(this, this.make)
  /** Still needs the database (PgClient, for KeyStore). */
  static readonly layer = this.layerNoDeps.pipe(Layer.provide([KeyStore.layer, Ids.layer]))
}
