import { createHash } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Context, Effect, Exit, Layer, Option, Queue, Schema, SchemaTransformation } from "effect"
import { cosignerFromPrivateKey, type Cosigner } from "../log/Cosignature.js"
import { parseVerifierKey, type NoteVerifier } from "../log/Note.js"
import { countWitnessAnswer } from "../observability/Metrics.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"
import { loadSigningKey } from "../platform/SigningKeys.js"
import { emptyTreeHash } from "../log/Merkle.js"
import { checkLogSignature, decide, parseAddCheckpoint, type HeldCheckpoint } from "./AddCheckpoint.js"
import { witnessSettings } from "./Settings.js"

export const witnessKeyFileName = "witness-signing-key.pem"

const Int8 = Schema.Union([Schema.BigInt, Schema.Number]).pipe(
  Schema.decodeTo(Schema.Int, SchemaTransformation.transform({ decode: (n) => Number(n), encode: (n) => BigInt(n) }))
)
const HeldRow = Schema.Struct({ tree_size: Int8, root_hash: Schema.Uint8Array })
const NoteRow = Schema.Struct({ note: Schema.String })
const OriginRow = Schema.Struct({ origin: Schema.String })
const originRows = Schema.decodeUnknownEffect(Schema.Array(OriginRow))
const heldRows = Schema.decodeUnknownEffect(Schema.Array(HeldRow))
const noteRows = Schema.decodeUnknownEffect(Schema.Array(NoteRow))

/** One answer to add-checkpoint: a status, a body and its media type. */
export interface WitnessAnswer {
  readonly status: 200 | 400 | 403 | 404 | 409 | 422
  readonly body: string
  /** `text/x.tlog.size` for 409, the cosignature line's `text/plain` for 200; problems otherwise. */
  readonly contentType: string
  /** For the log line and the problem document of a refusal. */
  readonly detail: string
}

/**
 * The methods of `Witness`. `submit` is add-checkpoint's work, plain async code behind the direct node:http
 * handler (witness/WitnessServer.ts): its throughput is the witness's benchmark.
 */
export interface WitnessShape {
  /** One add-checkpoint body → the answer (200 with the cosignature line, or the spec's 4xx), stored atomically first. */
  readonly submit: (body: string) => Promise<WitnessAnswer>
  readonly logFailure: (error: unknown) => void
  /** The newest checkpoint held for a log, by the SHA-256 of its origin. */
  readonly latestByOriginHash: (originHash: string) => Effect.Effect<Option.Option<string>>
  /** The witness's name and C2SP verifier key. */
  readonly key: { readonly name: string; readonly verifier_key: string }
  /** The origins of the logs it witnesses. */
  readonly origins: ReadonlyArray<string>
}

const makeWitness = Effect.gen(function*() {
  const settings = yield* Effect.orDie(witnessSettings)
  const sql = yield* PgClient.PgClient
  const mode = yield* DatabaseMode
  const { key } = yield* loadSigningKey({
    variable: "PV_WITNESS_SIGNING_KEY",
    configured: settings.signingKey,
    fileName: witnessKeyFileName,
    signs: "cosignatures",
    devEphemeralKeys: (yield* AppConfig).devEphemeralKeys
  }, mode)
  const cosigner: Cosigner = yield* Effect.try({
    try: () => cosignerFromPrivateKey(settings.name, key),
    catch: (error) => new Error(`PV_WITNESS_SIGNING_KEY is not a usable Ed25519 key: ${String((error as Error).message ?? error)}`)
  }).pipe(Effect.orDie)
  const trusted = new Map<string, Array<NoteVerifier>>()
  for (const vkey of settings.logs) {
    const parsed = parseVerifierKey(vkey)
    if (parsed.ok) trusted.set(parsed.value.name, [...(trusted.get(parsed.value.name) ?? []), parsed.value])
  }

  // The add-checkpoint path is plain async JavaScript (no fiber per request: the witness's throughput is
  // its CPU per answer, docs/PERFORMANCE.md); the statements run through the Effect SQL client, one
  // Effect run per statement, with this layer's services.
  const context = yield* Effect.context<never>()
  const run = Effect.runPromiseExitWith(context)
  const clock = yield* Clock.Clock
  const unwrap = <A>(exit: Exit.Exit<A, unknown>): A => {
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  }

  /** The latest checkpoint held per origin, as this process last stored or read it: a hint, checked by every store. */
  const heldCache = new Map<string, HeldCheckpoint | undefined>()
  const readHeld = async (origin: string): Promise<HeldCheckpoint | undefined> => {
    const rows = unwrap(await run(sql`SELECT tree_size, root_hash FROM witness_checkpoints WHERE origin = ${origin}`.pipe(Effect.flatMap(heldRows))))
    const held = rows[0] === undefined ? undefined : { size: rows[0].tree_size, root: rows[0].root_hash }
    heldCache.set(origin, held)
    return held
  }

  /**
   * Group commit of the compare-and-swap stores (as receipts do, src/receipts/Repo.ts): the stores that
   * arrive while a statement is in flight go into the next one, one multi-row conditional upsert and one
   * commit for all of them, each row stored only if the held row is still exactly the one its submission
   * was decided against. At most one store per origin goes into a statement (the others of that origin
   * are answered "not stored" and decide again on the row, as after any lost race). No caller is answered
   * before its row is committed.
   */
  interface Store {
    readonly origin: string
    readonly size: number
    readonly root: Uint8Array
    readonly note: string
    readonly at: Date
    readonly held: HeldCheckpoint | undefined
    readonly resolve: (stored: boolean) => void
    readonly reject: (error: unknown) => void
  }
  const storeBatch = (stores: ReadonlyArray<Store>) =>
    sql`
      WITH input AS (
        SELECT * FROM unnest(
          ${stores.map((s) => s.origin)}::text[], ${stores.map((s) => BigInt(s.size))}::bigint[],
          ${stores.map((s) => s.root)}::bytea[], ${stores.map((s) => s.note)}::text[],
          ${stores.map((s) => s.at)}::timestamptz[], ${stores.map((s) => BigInt(s.held?.size ?? -1))}::bigint[],
          ${stores.map((s) => s.held?.root ?? emptyTreeHash)}::bytea[]
        ) AS i(origin, tree_size, root_hash, note, updated_at, held_size, held_root)
      )
      INSERT INTO witness_checkpoints (origin, tree_size, root_hash, note, updated_at)
      SELECT origin, tree_size, root_hash, note, updated_at FROM input
      ON CONFLICT (origin) DO UPDATE SET tree_size = excluded.tree_size, root_hash = excluded.root_hash,
        note = excluded.note, updated_at = excluded.updated_at
      WHERE (witness_checkpoints.tree_size, witness_checkpoints.root_hash) =
        (SELECT held_size, held_root FROM input WHERE input.origin = excluded.origin)
      RETURNING origin`.pipe(Effect.flatMap(originRows), Effect.map((rows) => new Set(rows.map((row) => row.origin))))
  /** Answers every store of a batch; a statement that failed as a whole is run again row by row, so one bad row never fails the others. */
  const settle = (batch: ReadonlyArray<Store>): Effect.Effect<void> => {
    const first = new Map<string, Store>()
    for (const store of batch) if (!first.has(store.origin)) first.set(store.origin, store)
    const included = [...first.values()]
    return Effect.flatMap(Effect.exit(storeBatch(included)), (exit) => {
      if (Exit.isSuccess(exit)) {
        return Effect.sync(() => {
          for (const store of batch) store.resolve(first.get(store.origin) === store && exit.value.has(store.origin))
        })
      }
      if (included.length === 1) {
        return Effect.sync(() => {
          for (const store of batch) store.reject(Cause.squash(exit.cause))
        })
      }
      return Effect.forEach(batch, (store) =>
        first.get(store.origin) !== store
          ? Effect.sync(() => store.resolve(false))
          : Effect.flatMap(Effect.exit(storeBatch([store])), (alone) =>
            Effect.sync(() => Exit.isSuccess(alone) ? store.resolve(alone.value.has(store.origin)) : store.reject(Cause.squash(alone.cause)))),
      { concurrency: "unbounded", discard: true })
    })
  }
  // The embedded database has one connection; PostgreSQL gets a few writers so statements overlap. Each
  // writer is a fiber of this layer's scope taking up to 256 stores from the queue: a waiting writer
  // resumes on the scheduler's next turn of the event loop, so the requests read together are stored together.
  const writers = mode.kind === "embedded" ? 1 : 4
  const pending = yield* Queue.unbounded<Store>()
  for (let i = 0; i < writers; i++) {
    yield* Queue.takeBetween(pending, 1, 256).pipe(
      Effect.flatMap(settle),
      Effect.forever,
      Effect.forkScoped
    )
  }
  const store = (origin: string, size: number, root: Uint8Array, note: string, at: Date, held: HeldCheckpoint | undefined) =>
    new Promise<boolean>((resolve, reject) => {
      if (!Queue.offerUnsafe(pending, { origin, size, root, note, at, held, resolve, reject })) {
        reject(new Error("the witness is shutting down"))
      }
    })

  const answer = (status: WitnessAnswer["status"], detail: string, body = "", contentType = "text/plain; charset=utf-8"): WitnessAnswer =>
    ({ status, detail, body, contentType })

  /**
   * C2SP tlog-witness add-checkpoint. Parsing and the log's signature are checked first (nothing is
   * read for them); then the rules are decided against the held checkpoint and the new one is stored
   * with one conditional statement that succeeds only if the row is still the one decided against.
   * Rejects only when the database fails (the caller answers 503/500).
   */
  const decideAndStore = async (body: string): Promise<WitnessAnswer> => {
    const request = parseAddCheckpoint(body)
    if (!request.ok) return answer(400, request.detail)
    const signed = checkLogSignature(request.value.note, trusted)
    switch (signed._tag) {
      case "Malformed":
        return answer(400, `the checkpoint is not a signed checkpoint note: ${signed.detail}`)
      case "UnknownOrigin":
        return answer(404, `this witness does not witness the log ${JSON.stringify(signed.origin)}`)
      case "Untrusted":
        return answer(403, signed.detail)
    }
    const { checkpoint, text, logSignatureLines } = signed.value
    if (request.value.oldSize > checkpoint.size) {
      return answer(400, `the old size ${request.value.oldSize} is above the checkpoint's size ${checkpoint.size}`)
    }
    const now = clock.currentTimeMillisUnsafe()
    // Compare-and-swap, retried on a lost race: decide against the held checkpoint (this process's copy
    // first, the row when that copy is absent, stale or refuses), then store only if the row is still
    // exactly what was decided against. A submission that lost the race is decided again on the winner's
    // row (a 409 with its size), so a stored size never goes back, across processes too.
    let fromRow = false
    for (;;) {
      const held = fromRow || !heldCache.has(checkpoint.origin) ? await readHeld(checkpoint.origin) : heldCache.get(checkpoint.origin)
      const decision = decide(request.value, checkpoint, held)
      if (decision._tag !== "Cosign") {
        if (!fromRow) {
          fromRow = true
          continue
        }
        switch (decision._tag) {
          case "BadRequest":
            return answer(400, decision.detail)
          case "Conflict":
            return answer(409, decision.detail, `${decision.heldSize}\n`, "text/x.tlog.size")
          case "Unprocessable":
            return answer(422, decision.detail)
        }
      }
      const line = cosigner.cosign(text, Math.max(1, Math.floor(now / 1000)))
      let note = `${text}\n`
      for (const l of logSignatureLines) note += `${l}\n`
      note += line
      const stored = await store(checkpoint.origin, checkpoint.size, checkpoint.root, note, new Date(now), held)
      if (stored) {
        heldCache.set(checkpoint.origin, { size: checkpoint.size, root: checkpoint.root })
        return answer(200, `cosigned ${checkpoint.origin} at size ${checkpoint.size}`, line)
      }
      fromRow = true
    }
  }
  const submit = async (body: string): Promise<WitnessAnswer> => {
    const result = await decideAndStore(body)
    countWitnessAnswer(result.status)
    return result
  }

  /** The latest checkpoint cosigned for the origin whose SHA-256 (lowercase hex) is given: the monitoring API. */
  const latestByOriginHash = (originHash: string): Effect.Effect<Option.Option<string>> =>
    Effect.gen(function*() {
      const origin = [...trusted.keys()].find((o) => createHashHex(o) === originHash)
      if (origin === undefined) return Option.none()
      const rows = yield* sql`SELECT note FROM witness_checkpoints WHERE origin = ${origin}`.pipe(Effect.flatMap(noteRows), Effect.orDie)
      return Option.map(Option.fromUndefinedOr(rows[0]), (row) => row.note)
    })

  /** The log line of a submission the database failed (its answer is 503 or 500). */
  const logFailure = (error: unknown): void => void run(Effect.logError("add-checkpoint failed", Cause.die(error)))

  return {
    submit,
    logFailure,
    latestByOriginHash: Effect.fn("Witness.latestByOriginHash")(latestByOriginHash),
    key: { name: cosigner.name, verifier_key: cosigner.verifierKey },
    origins: [...trusted.keys()]
  } satisfies WitnessShape
})

const createHashHex = (text: string) => createHash("sha256").update(text, "utf8").digest("hex")

/**
 * The witness (C2SP tlog-witness) over its own database: the logs it trusts, its cosigning key, and
 * per origin the latest checkpoint it cosigned.
 */
export class Witness extends Context.Service<Witness, WitnessShape>()("pv/Witness", { make: makeWitness }) {
  static readonly layer = Layer.effect(this, makeWitness)
}
