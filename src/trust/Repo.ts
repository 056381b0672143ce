import { PgClient } from "@effect/sql-pg"
import { Array as Arr, Context, Effect, Layer, Option, Schema } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { DeterminationBody, StoredDetermination } from "../domain/Determination.js"
import type { EventHead } from "../domain/MachineTrust.js"
import { PublicId } from "../domain/PublicId.js"
import * as Rows from "../platform/Rows.js"

/**
 * A body as stored: it was decoded with DeterminationBody when it was ingested and is never changed, so a
 * read checks its shape only (decoding all of it again would cost a full parse on every cache miss).
 */
const StoredBody = Schema.declare((u: unknown): u is DeterminationBody => typeof u === "object" && u !== null && !Array.isArray(u))

/** One stored version with its head, as the trust read path decodes it. */
export const VersionRow = Schema.Struct({
  public_id: PublicId,
  determination_id: Schema.String,
  version: Schema.Int,
  body: StoredBody,
  determination_digest: Schema.String,
  evidence_digest: Schema.String,
  recorded_at: Schema.Date,
  head_sequence: Schema.Int,
  head_hash: Schema.NullOr(Schema.String),
  freshness_due_at: Schema.NullOr(Schema.Date)
})

const HeadRow = Schema.Struct({
  current_version: Schema.Int,
  determination_digest: Schema.NullOr(Schema.String),
  body: Schema.NullOr(StoredBody)
})

const CountRow = Schema.Struct({ n: Schema.NumberFromString })


/** The current version together with the head of its event chain, read in one query so they agree. */
export interface CurrentDetermination extends StoredDetermination {
  readonly public_id: PublicId
  readonly event_head: EventHead
  /** When the chain next has a freshness transition to announce (epoch ms), null when none is left. */
  readonly freshness_due_ms: number | null
}

const toStored = (row: typeof VersionRow.Type): CurrentDetermination => ({
  public_id: row.public_id,
  determination_id: row.determination_id,
  version: row.version,
  body: row.body,
  determination_digest: row.determination_digest,
  evidence_digest: row.evidence_digest,
  recorded_at: row.recorded_at.toISOString(),
  event_head: { sequence: row.head_sequence, eventHash: row.head_hash },
  freshness_due_ms: row.freshness_due_at === null ? null : row.freshness_due_at.getTime()
})

/** The head row of a determination, locked (`lockHead`): its current version, digest and body (none before the first). */
export type LockedHead = typeof HeadRow.Type

export interface DeterminationsRepoShape {
  readonly findCurrent: (publicId: PublicId) => Effect.Effect<Option.Option<CurrentDetermination>, SqlError>
  readonly findBySubject: (subjectId: string) => Effect.Effect<Array<CurrentDetermination>, SqlError>
  readonly lockHead: (publicId: PublicId, subjectId: string, now: Date) => Effect.Effect<LockedHead, SqlError>
  readonly insertVersion: (v: NewVersion) => Effect.Effect<void, SqlError>
  readonly count: Effect.Effect<number, SqlError>
  readonly withTransaction: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
}

export interface NewVersion {
  readonly public_id: PublicId
  readonly determination_id: string
  readonly version: number
  readonly body: DeterminationBody
  readonly determination_digest: string
  readonly evidence_digest: string
  readonly recorded_at: Date
}

const make = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient

  const current = Rows.findOneOption({
    Request: Schema.String,
    Result: VersionRow,
    execute: (publicId) => sql`
      SELECT v.public_id, v.determination_id, v.version, v.body, v.determination_digest, v.evidence_digest, v.recorded_at,
        d.head_sequence, d.head_hash, d.freshness_due_at
      FROM determinations d JOIN determination_versions v ON v.determination_id = d.current_version_id
      WHERE d.public_id = ${publicId}`
  })
  const findCurrent = (publicId: PublicId) => Effect.map(current(publicId), Option.map(toStored))

  const ofSubject = Rows.findAll({
    Request: Schema.String,
    Result: VersionRow,
    execute: (subjectId) => sql`
      SELECT v.public_id, v.determination_id, v.version, v.body, v.determination_digest, v.evidence_digest, v.recorded_at,
        d.head_sequence, d.head_hash, d.freshness_due_at
      FROM determinations d JOIN determination_versions v ON v.determination_id = d.current_version_id
      WHERE d.subject_id = ${subjectId} ORDER BY d.public_id`
  })
  const findBySubject = (subjectId: string) => Effect.map(ofSubject(subjectId), (rows) => rows.map(toStored))

  const lockedHead = Rows.findAll({
    Request: Schema.String,
    Result: HeadRow,
    execute: (publicId) => sql`
      SELECT d.current_version, v.determination_digest, v.body
      FROM determinations d LEFT JOIN determination_versions v ON v.determination_id = d.current_version_id
      WHERE d.public_id = ${publicId}`
  })

  /**
   * Inside a transaction: make sure the head row exists, then lock it, so concurrent writers of one
   * determination queue here and each sees the version the previous one stored.
   */
  const lockHead = (publicId: PublicId, subjectId: string, now: Date) =>
    Effect.gen(function*() {
      yield* sql`
        INSERT INTO determinations (public_id, subject_id, current_version_id, current_version, created_at, updated_at)
        VALUES (${publicId}, ${subjectId}, NULL, 0, ${now}, ${now})
        ON CONFLICT (public_id) DO NOTHING`
      yield* sql`SELECT 1 FROM determinations WHERE public_id = ${publicId} FOR UPDATE`
      // Read after the lock, in a statement of its own: under READ COMMITTED a locking join that waited
      // re-checks the locked row but not the joined one, so it would miss the version committed meanwhile.
      const rows = yield* lockedHead(publicId)
      return rows[0]!
    })

  const insertVersion = (v: NewVersion) =>
    Effect.gen(function*() {
      yield* sql`
        INSERT INTO determination_versions
          (determination_id, public_id, version, body, determination_digest, evidence_digest, tier,
           lifecycle_state, as_of, valid_until, recorded_at)
        VALUES (${v.determination_id}, ${v.public_id}, ${v.version}, ${sql.json(v.body)}, ${v.determination_digest},
          ${v.evidence_digest}, ${v.body.tier}, ${v.body.lifecycle_state}, ${new Date(v.body.as_of)},
          ${new Date(v.body.valid_until)}, ${v.recorded_at})`
      const evidence: ReadonlyArray<Record<string, unknown>> = v.body.evidence.map((e) => ({
        determination_id: v.determination_id,
        evidence_id: e.evidence_id,
        kind: e.kind,
        digest: e.digest,
        collected_at: new Date(e.collected_at),
        source: e.source
      }))
      if (Arr.isReadonlyArrayNonEmpty(evidence)) yield* sql`INSERT INTO evidence ${sql.insert(evidence)}`
      yield* sql`
        UPDATE determinations
        SET current_version_id = ${v.determination_id}, current_version = ${v.version},
            subject_id = ${v.body.subject.subject_id}, updated_at = ${v.recorded_at}
        WHERE public_id = ${v.public_id}`
    })

  // count(*) is int8: read as text, so the driver's bigint never reaches the caller.
  const count = Rows.all(CountRow, sql`SELECT count(*)::text AS n FROM determinations WHERE current_version_id IS NOT NULL`).pipe(
    Effect.map((rows) => rows[0]?.n ?? 0)
  )

  return {
    findCurrent: Effect.fn("DeterminationsRepo.findCurrent")(findCurrent),
    findBySubject: Effect.fn("DeterminationsRepo.findBySubject")(findBySubject),
    lockHead: Effect.fn("DeterminationsRepo.lockHead")(lockHead),
    insertVersion: Effect.fn("DeterminationsRepo.insertVersion")(insertVersion),
    count: Effect.withSpan(count, "DeterminationsRepo.count"),
    // The SQL client's own combinator, which opens its own span (sql.transaction).
    withTransaction: sql.withTransaction
  } satisfies DeterminationsRepoShape
})

/** SQL for determinations, their versions and evidence. Nothing here decides anything. */
export class DeterminationsRepo extends Context.Service<DeterminationsRepo, DeterminationsRepoShape>()("pv/DeterminationsRepo", { make }) {
  static readonly layer = Layer.effect(DeterminationsRepo, make)
}
