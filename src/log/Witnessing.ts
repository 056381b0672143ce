import { randomUUID } from "node:crypto"
import { Agent as HttpAgent, request as httpRequest } from "node:http"
import { Agent as HttpsAgent, request as httpsRequest } from "node:https"
import { Clock, Context, Duration, Effect, Layer, Option } from "effect"
import { countWitnessRefusal, countWitnessSubmission } from "../observability/Metrics.js"
import { AppConfig } from "../platform/Config.js"
import { cosignatureLinesOf, parseCosignerKey, type CosignatureVerifier } from "./Cosignature.js"
import { hashesFromHex } from "./Merkle.js"
import { splitNote } from "./Note.js"
import type { StoredCheckpoint } from "./Repo.js"
import { TransparencyLog } from "./TransparencyLog.js"
import { type WitnessLease, WitnessRepo } from "./WitnessRepo.js"

/** One add-checkpoint request's time limit: a slow witness delays only its own loop. */
const SubmissionTimeoutMs = 5_000

/** A 409 names the size the witness holds; the request is retried from it this many times at most in one turn. */
const MaxRetriesPerTurn = 3

export interface ConfiguredWitness {
  readonly url: string
  /** Its add-checkpoint endpoint, parsed once. */
  readonly endpoint: URL
  /** One kept-alive connection: the loop's submissions are serialized, so one is all it uses. */
  readonly agent: HttpAgent
  /** Its verifier key: the id of its rows. */
  readonly id: string
  readonly verifier: CosignatureVerifier
}

/** "current": the lease showed the witness already holds the latest checkpoint, its cosignature stored (another instance submitted it). */
export type Outcome = "cosigned" | "idle" | "current" | "busy" | "refused" | "unreachable"

/** How a turn ended, and whether it submitted (a POST, and the retries a 409 called for, are one submission). */
export interface Turn {
  readonly outcome: Outcome
  readonly submitted: boolean
}

/**
 * After each kind of turn, the witness's loop waits at least this long before the next; after a
 * submission, also until PV_LOG_WITNESS_INTERVAL_MS from its start. "idle" is how soon a new checkpoint
 * is noticed when the log was quiet (an in-memory check).
 */
const pauseAfter: Record<Outcome, number> = { cosigned: 0, idle: 100, current: 500, busy: 1_000, refused: 2_000, unreachable: 1_000 }

/** A refusal's words for the log line: a problem document's detail, else the body's start. */
const answerText = (contentType: string, text: string): string => {
  if (/^application\/problem\+json/i.test(contentType)) {
    try {
      const detail = (JSON.parse(text) as { detail?: unknown }).detail
      if (typeof detail === "string") return detail
    } catch {
      // Not JSON after all: shown as it came.
    }
  }
  return text.trim().slice(0, 300)
}

/** The methods of `LogWitnessing`: one loop per configured witness, off the request path (`turn` is an `Effect.fn`). */
export interface LogWitnessingShape {
  readonly witnesses: ReadonlyArray<ConfiguredWitness>
  /** One submission to `witness` (lease, add-checkpoint, its answer stored, release). */
  readonly turn: (witness: ConfiguredWitness) => Effect.Effect<Turn, unknown>
  /** Turns forever, at most one submission per PV_LOG_WITNESS_INTERVAL_MS. */
  readonly loop: (witness: ConfiguredWitness) => Effect.Effect<never>
  /**
   * After the loops stopped: any lease this instance still holds (a turn stopped between taking it and its
   * end) ends within the interval, so the next instance does not wait out the lease's 15 s.
   */
  readonly releaseLeases: Effect.Effect<void>
}

const makeLogWitnessing = Effect.gen(function*() {
  const config = yield* AppConfig
  const log = yield* TransparencyLog
  const repo = yield* WitnessRepo
  const token = randomUUID()
  const interval = config.logWitnessIntervalMs
  const witnesses: ReadonlyArray<ConfiguredWitness> = config.logWitnesses.flatMap((w) => {
    const parsed = parseCosignerKey(w.verifierKey)
    if (!parsed.ok) return []
    const endpoint = new URL(`${w.url}/add-checkpoint`)
    const options = { keepAlive: true, maxSockets: 1 }
    const agent = endpoint.protocol === "https:" ? new HttpsAgent(options) : new HttpAgent(options)
    return [{ url: w.url, endpoint, agent, id: w.verifierKey, verifier: parsed.value }]
  })
  yield* Effect.addFinalizer(() => Effect.sync(() => witnesses.forEach((w) => w.agent.destroy())))
  const ids = witnesses.map((w) => w.id)
  /** The size each witness holds, as this instance last learned it: an idle loop asks the database only when the log grew past it. */
  const known = new Map<string, number>()

  /** One add-checkpoint request over the witness's kept-alive connection (node:http: a fraction of fetch's CPU per request). */
  const post = (witness: ConfiguredWitness, body: string) =>
    Effect.tryPromise({
      try: (signal) =>
        new Promise<{ status: number; contentType: string; text: string }>((resolve, reject) => {
          const send = witness.endpoint.protocol === "https:" ? httpsRequest : httpRequest
          const request = send(witness.endpoint, {
            method: "POST",
            agent: witness.agent,
            headers: { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(body) },
            signal: AbortSignal.any([signal, AbortSignal.timeout(SubmissionTimeoutMs)])
          }, (response) => {
            const chunks: Array<Buffer> = []
            response.on("data", (chunk: Buffer) => chunks.push(chunk))
            response.once("error", reject)
            response.once("end", () =>
              resolve({ status: response.statusCode ?? 0, contentType: response.headers["content-type"] ?? "", text: Buffer.concat(chunks).toString("utf8") }))
          })
          request.once("error", reject)
          request.end(body)
        }),
      catch: (error) => error as Error
    })

  /**
   * The add-checkpoint body for `target` from size `old`: the witnesses usually get the same pair, so the last
   * one made is kept and its proof computed once.
   */
  let lastBody: { readonly old: number; readonly note: string; readonly body: string } | undefined
  const bodyFor = (old: number, target: StoredCheckpoint) =>
    lastBody !== undefined && lastBody.old === old && lastBody.note === target.note
      ? Effect.succeed(lastBody.body)
      : Effect.map(Effect.orDie(log.consistency(String(old), String(target.size))), (proof) => {
        const path = hashesFromHex(proof.consistency_path) ?? []
        const body = `old ${old}\n${path.map((h) => `${Buffer.from(h).toString("base64")}\n`).join("")}\n${target.note}`
        lastBody = { old, note: target.note, body }
        return body
      })

  const refused = (witness: ConfiguredWitness, what: string, status: number, answer: string) =>
    Effect.gen(function*() {
      countWitnessRefusal(witness.verifier.name, String(status))
      yield* Effect.logWarning(
        `witness ${witness.verifier.name} (${witness.url}) refused ${what}: ${status} ${answer}; ` +
          "/log/checkpoint keeps serving the last witnessed checkpoint"
      )
      yield* repo.recordAnswer(witness.id, token, { status, text: answer })
      return "refused" as const
    })

  /**
   * One turn at one witness, under this instance's lease on it: submit the checkpoint it should cosign
   * next, with the consistency proof from the size it holds, and store its cosignature. The checkpoint
   * is the largest one another witness already cosigned above that size (so the witnesses meet on
   * common sizes and a quorum forms), else the latest: the lease's statement finds it. A 409 tells the
   * size it holds: remembered, and the request is made again from it. After a submission the lease is
   * kept until the interval from its start has passed, so other instances keep the cadence too.
   */
  const turn = Effect.fn("LogWitnessing.turn")((witness: ConfiguredWitness): Effect.Effect<Turn, unknown> =>
    Effect.gen(function*() {
      const latestKnown = yield* log.current()
      if (Option.isNone(latestKnown)) return { outcome: "idle", submitted: false } as const
      const knownHeld = known.get(witness.id)
      if (knownHeld !== undefined && knownHeld >= latestKnown.value.size) return { outcome: "idle", submitted: false } as const
      const lease = yield* repo.lease(witness.id, token, ids, latestKnown.value.size)
      if (Option.isNone(lease)) return { outcome: "busy", submitted: false } as const
      let submitted = false
      const outcome = yield* submit(witness, lease.value, () => (submitted = true)).pipe(
        // A stored cosignature ends the lease in the same statement; any other end of the turn here.
        Effect.onExit((exit) =>
          exit._tag === "Success" && exit.value === "cosigned"
            ? Effect.void
            : Effect.ignore(repo.release(witness.id, token, submitted ? interval : undefined))
        )
      )
      return { outcome, submitted }
    }))

  /** The submissions of one turn, under the lease, starting from the size the witness holds (null: unknown). */
  const submit = (witness: ConfiguredWitness, leased: WitnessLease, submitting: () => void) =>
    Effect.gen(function*() {
      let held = leased.cosignedSize
      for (let attempt = 0; attempt <= MaxRetriesPerTurn; attempt++) {
        if (held !== null) known.set(witness.id, held)
        const latest = yield* log.current(held ?? 0)
        if (Option.isNone(latest)) return "idle" as const
        const old = held ?? 0
        if (held !== null && held > latest.value.size) {
          return yield* refused(witness, `the log's checkpoint of size ${latest.value.size}`, 409, `it holds size ${held}, larger than the log's tree`)
        }
        const first = attempt === 0
        // It holds the latest checkpoint: done, unless its cosignature of it was never stored (an answer lost
        // to a crash); then the same checkpoint is submitted again (old size = size, no proof) to be cosigned anew.
        if (held !== null && held === latest.value.size && (first ? leased.stored : yield* repo.hasCosignature(witness.id, held))) {
          return "current" as const
        }
        const joinable = first ? leased.joinable : yield* repo.joinableAbove(ids, old, latest.value.size)
        const target = Option.getOrElse(joinable, () => latest.value)
        const body = yield* bodyFor(old, target)
        submitting()
        const answer = yield* Effect.result(post(witness, body))
        if (answer._tag === "Failure") {
          countWitnessSubmission(witness.verifier.name, "error")
          yield* Effect.logWarning(`witness ${witness.verifier.name} (${witness.url}) did not answer: ${answer.failure.message}`)
          return "unreachable" as const
        }
        const { status, contentType, text } = answer.success
        countWitnessSubmission(witness.verifier.name, String(status))
        if (status === 200) {
          const split = splitNote(target.note)
          const lines = split.ok ? cosignatureLinesOf(text, witness.verifier, split.value.text) : split
          if (!lines.ok) return yield* refused(witness, `the checkpoint of size ${target.size}`, 200, `an answer that is not its valid cosignature: ${lines.detail}`)
          yield* repo.storeCosignature(witness.id, token, target.size, lines.value.lines[0]!, new Date(lines.value.timestamp * 1000), interval)
          known.set(witness.id, target.size)
          // A quorum may be met now: receipts waiting for their proof look again (Prefer: wait).
          yield* log.advanced
          return "cosigned" as const
        }
        const heldNow = status === 409 && contentType.split(";")[0]!.trim() === "text/x.tlog.size" && /^(0|[1-9][0-9]*)\n$/.test(text)
          ? Number(text.trim())
          : undefined
        // The same size back means it holds a checkpoint of that size with another root: a fork.
        if (heldNow === undefined || heldNow === old) {
          return yield* refused(witness, `the checkpoint of size ${target.size} (old size ${old})`, status, answerText(contentType, text))
        }
        yield* repo.recordAnswer(witness.id, token, { status, text, cosignedSize: heldNow })
        held = heldNow
      }
      return "busy" as const
    })

  /**
   * The loop of one witness: turns one after the other (so its submissions are serialized), each paused
   * by its outcome, and a submission at most every PV_LOG_WITNESS_INTERVAL_MS, counted from the start of
   * the one before (Effect's Clock): each one carries the latest checkpoint, covering all since the last.
   */
  const loop = (witness: ConfiguredWitness) =>
    Effect.gen(function*() {
      let lastSubmission: number | undefined
      for (;;) {
        const started = yield* Clock.currentTimeMillis
        const { outcome, submitted } = yield* turn(witness).pipe(
          // A turn that failed may have submitted before it did: counted as a submission, so the interval holds.
          Effect.catchCause((cause) =>
            Effect.as(Effect.logWarning(`witnessing by ${witness.verifier.name} failed; retrying`, cause), { outcome: "unreachable", submitted: true } as const)
          )
        )
        if (submitted) lastSubmission = started
        const now = yield* Clock.currentTimeMillis
        // Clamped: a clock moved backwards (tests shift it) never lengthens the wait beyond the interval.
        const untilInterval = lastSubmission === undefined ? 0 : Math.min(interval, lastSubmission + interval - now)
        yield* Effect.sleep(Duration.millis(Math.max(pauseAfter[outcome], untilInterval)))
      }
    })

  const releaseLeases = witnesses.length === 0
    ? Effect.void
    : Effect.ignore(repo.releaseAll(token, interval)).pipe(Effect.withSpan("LogWitnessing.releaseLeases"))

  return { witnesses, turn, loop: Effect.fn("LogWitnessing.loop")(loop), releaseLeases } satisfies LogWitnessingShape
})

/**
 * Puts each new checkpoint before the configured witnesses (PV_LOG_WITNESSES, C2SP tlog-witness):
 * one loop per witness, beside the integrator (a write never waits for a witness). Across instances,
 * a lease row per witness (migration 0007) lets one instance at a time submit to it; the size each
 * witness holds, its last answer and its cosignatures are rows every instance reads.
 */
export class LogWitnessing extends Context.Service<LogWitnessing, LogWitnessingShape>()("pv/LogWitnessing", {
  make: makeLogWitnessing
}) {
  static readonly layerNoDeps = Layer.effect(this, makeLogWitnessing)
  static readonly layer = this.layerNoDeps.pipe(Layer.provide([TransparencyLog.layer, WitnessRepo.layer]))
}

/** The witnessing loops of this instance (none without witnesses), stopped with the server. */
export const LogWitnessingLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const witnessing = yield* LogWitnessing
    // Added before the loops are forked, so it runs after they are interrupted (finalizers run in reverse).
    yield* Effect.addFinalizer(() => witnessing.releaseLeases)
    for (const witness of witnessing.witnesses) yield* Effect.forkScoped(witnessing.loop(witness))
  })
)
