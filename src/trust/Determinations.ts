import { Clock, Effect, Option } from "effect"
import { digestOf } from "../domain/Canonical.js"
import type { DeterminationBody } from "../domain/Determination.js"
import { DeterminationNotFound, InvalidPublicId } from "../domain/Problem.js"
import { isPublicId } from "../domain/PublicId.js"
import { EventLog } from "../events/EventLog.js"
import { Ids } from "../platform/Ids.js"
import { type CurrentDetermination, DeterminationsRepo } from "./Repo.js"
import { TrustCache } from "./TrustCache.js"

export type IngestOutcome = "created" | "updated" | "unchanged"

export interface IngestResult {
  readonly outcome: IngestOutcome
  readonly public_id: string
  readonly determination_id: string
  readonly determination_digest: string
  readonly version: number
  readonly changed_fields: ReadonlyArray<string>
}

/** Top-level fields of the ingestion body whose canonical value differs between two versions. */
export const changedFields = (previous: DeterminationBody | null, next: DeterminationBody): ReadonlyArray<string> => {
  const keys = new Set([...Object.keys(previous ?? {}), ...Object.keys(next)])
  return [...keys].filter((key) =>
    previous === null ||
    digestOf((previous as Record<string, unknown>)[key] ?? null) !== digestOf((next as Record<string, unknown>)[key] ?? null)
  ).sort()
}

export const requirePublicId = (input: string): Effect.Effect<string, InvalidPublicId> =>
  isPublicId(input)
    ? Effect.succeed(input)
    : Effect.fail(new InvalidPublicId({ detail: `'${input.slice(0, 80)}' is not a DET-V1-* or QUAL-V1-* identifier` }))

/**
 * Determination records: operator ingestion (one stored version per change) and reads of the
 * current version. Both the PUT endpoint and `pv import` come through `ingest`.
 */
export class Determinations extends Effect.Service<Determinations>()("pv/Determinations", {
  effect: Effect.gen(function*() {
    const repo = yield* DeterminationsRepo
    const ids = yield* Ids
    const events = yield* EventLog
    const cache = yield* TrustCache

    const ingest = (publicIdInput: string, body: DeterminationBody) =>
      Effect.gen(function*() {
        const publicId = yield* requirePublicId(publicIdInput)
        const determinationDigest = digestOf(body)
        return yield* repo.withTransaction(Effect.gen(function*() {
          const now = new Date(yield* Clock.currentTimeMillis)
          const head = yield* repo.lockHead(publicId, body.subject.subject_id, now)
          if (head.determination_digest === determinationDigest) {
            const current = yield* repo.findCurrent(publicId)
            const stored = Option.getOrThrow(current)
            return {
              outcome: "unchanged",
              public_id: publicId,
              determination_id: stored.determination_id,
              determination_digest: determinationDigest,
              version: stored.version,
              changed_fields: []
            } satisfies IngestResult
          }
          const determinationId = yield* ids.make("dv")
          const version = head.current_version + 1
          yield* repo.insertVersion({
            public_id: publicId,
            determination_id: determinationId,
            version,
            body,
            determination_digest: determinationDigest,
            evidence_digest: digestOf(body.evidence),
            recorded_at: now
          })
          const changed = changedFields(head.body, body)
          // The one event of this change, in this transaction: committed together or not at all.
          yield* events.recordChange({
            public_id: publicId,
            determination_id: determinationId,
            version,
            determination_digest: determinationDigest,
            previous: head.body,
            body,
            changed_fields: changed
          })
          return {
            outcome: version === 1 ? "created" : "updated",
            public_id: publicId,
            determination_id: determinationId,
            determination_digest: determinationDigest,
            version,
            changed_fields: changed
          } satisfies IngestResult
        }))
      }).pipe(
        // After the commit, so no reader on this instance can cache the state from before it.
        Effect.tap((result) => result.outcome === "unchanged" ? Effect.void : cache.invalidate(result.public_id)),
        Effect.catchTag("SqlError", Effect.die)
      )

    const current = (publicIdInput: string): Effect.Effect<CurrentDetermination, InvalidPublicId | DeterminationNotFound> =>
      requirePublicId(publicIdInput).pipe(
        Effect.flatMap((publicId) => Effect.orDie(repo.findCurrent(publicId))),
        Effect.flatMap(Option.match({
          onNone: () => Effect.fail(new DeterminationNotFound({ detail: `no determination ${publicIdInput}` })),
          onSome: Effect.succeed
        }))
      )

    const bySubject = (subjectId: string) => Effect.orDie(repo.findBySubject(subjectId))

    return { ingest, current, bySubject, count: Effect.orDie(repo.count) } as const
  }),
  dependencies: [DeterminationsRepo.Default, Ids.Default, EventLog.Default, TrustCache.Default]
}) {}

