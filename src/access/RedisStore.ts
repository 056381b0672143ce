import { Effect, Exit, Layer, Redacted, Scope, Semaphore } from "effect"
import { RateLimiter } from "effect/persistence"
import { type Store, storeFailure } from "./Counters.js"

/** After a failed connection attempt, requests are refused (503) for this long before the next attempt. */
const RetryConnectMs = 1_000

/**
 * The library's Redis store (`effect/persistence`, its Lua scripts round each expiry up to a whole
 * millisecond) on node-redis. node-redis is loaded only here, so deployments without REDIS_URL never
 * load it. Rate limiting fails closed without Redis, but the service still starts: the connection is
 * made at start when Redis answers, else on a later request (at most one attempt a second). Once
 * connected, node-redis reconnects by itself, with backoff and for good (NodeRedis's default strategy gives
 * up after a socket time-out, which would leave rate limiting refusing everything until a restart);
 * commands sent while it is reconnecting fail at once (no offline queue), so requests get 503 rather
 * than waiting on Redis.
 */
export const layerRedisStore = (url: Redacted.Redacted, prefix: string): Layer.Layer<RateLimiter.RateLimiterStore> =>
  Layer.effect(
    RateLimiter.RateLimiterStore,
    Effect.gen(function*() {
      const NodeRedis = yield* Effect.promise(() => import("@effect/platform-node/NodeRedis"))
      const scope = yield* Effect.scope
      const lock = Semaphore.makeUnsafe(1)
      let connected: Store | undefined
      let failedAt = Number.NEGATIVE_INFINITY

      const attempt = Effect.gen(function*() {
        // Before the first connection: fail at once (the next request tries again, at most once a second).
        // After it: reconnect forever, 50 ms doubling to 2 s, plus jitter.
        let established = false
        const redis = NodeRedis.layer({
          url: Redacted.value(url),
          disableOfflineQueue: true,
          socket: {
            reconnectStrategy: (retries: number, cause: Error) =>
              established ? Math.min(2 ** retries * 50, 2_000) + Math.floor(Math.random() * 200) : cause
          }
        })
        const connection = yield* Scope.fork(scope)
        const store = yield* Layer.buildWithScope(redis, connection).pipe(
          Effect.flatMap((context) => Effect.provideContext(RateLimiter.makeStoreRedis({ prefix }), context)),
          Effect.onError(() => Scope.close(connection, Exit.void))
        )
        established = true
        return store
      })

      const connect: Effect.Effect<Store, RateLimiter.RateLimiterError> = lock.withPermits(1)(
        Effect.clockWith((clock) => {
          if (connected !== undefined) return Effect.succeed(connected)
          if (clock.currentTimeMillisUnsafe() - failedAt < RetryConnectMs) {
            return Effect.fail(storeFailure("Redis is not connected"))
          }
          return attempt.pipe(
            Effect.tap((store) => Effect.sync(() => void (connected = store))),
            Effect.tapError(() => Effect.sync(() => void (failedAt = clock.currentTimeMillisUnsafe()))),
            Effect.mapError((error) => storeFailure("could not connect to Redis", error))
          )
        })
      )

      yield* connect.pipe(
        Effect.catch((error) => Effect.logWarning("Redis is unreachable; rate limiting refuses requests until it answers", error))
      )

      const use = <A>(f: (store: Store) => Effect.Effect<A, RateLimiter.RateLimiterError>) =>
        connected !== undefined ? f(connected) : Effect.flatMap(connect, f)

      return RateLimiter.RateLimiterStore.of({
        fixedWindow: (options) => use((store) => store.fixedWindow(options)),
        tokenBucket: (options) => use((store) => store.tokenBucket(options)),
        adaptiveConsume: (options) => use((store) => store.adaptiveConsume(options)),
        adaptiveFeedback: (options) => use((store) => store.adaptiveFeedback(options))
      })
    })
  )
