import { createHash } from "node:crypto"
import { readFile, rename, writeFile } from "node:fs/promises"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { type ConsistencyFailure, parsePolicy, verifyCheckpointConsistency, witnessQuorumProblem, type WitnessPolicy } from "../client/log.js"
import { openCheckpoint, peekCheckpoint } from "../log/Checkpoint.js"
import { hexOf } from "../log/Merkle.js"
import { parseVerifierKey, verifierKeyOf, type NoteVerifier } from "../log/Note.js"
import { parseLogWitness } from "../platform/LogWitness.js"
import { hasWitnesses } from "../verify/Bundle.js"
import { verifySync } from "../verify/NodeCrypto.js"
import { policyLogKey } from "../verify/Policy.js"

export type MonitorFailure = "unreachable" | "bad_key" | "bad_signature" | "witness_quorum" | "rollback" | "fork" | "state"

/**
 * `pv log monitor`'s exit code for each outcome (docs/API.md, "Monitor"): a fork (a proof that fails to
 * verify, or two signed checkpoints that disagree) and a rollback are the log's misbehaviour proven; an
 * unreachable or erroring log proves nothing and has a code of its own, so a cron job can tell them apart.
 */
export const MonitorExitCodes: Readonly<Record<MonitorFailure | "ok" | "usage", number>> = {
  ok: 0,
  usage: 1,
  state: 1,
  bad_key: 1,
  fork: 2,
  rollback: 3,
  unreachable: 4,
  witness_quorum: 5,
  bad_signature: 6
}

/** Every request's limit (connect, answer and body) unless --timeout says otherwise. */
export const DefaultMonitorTimeoutMs = 10_000

/** `pv log monitor` found a problem (or could not check): the message says which. */
export class LogMonitorFailed extends Data.TaggedError("LogMonitorFailed")<{ readonly failure: MonitorFailure; readonly message: string }> {}

export interface LogMonitorOptions {
  readonly baseUrl: string
  /** Keeps the pinned key and the last checkpoint that passed. */
  readonly state: string
  /**
   * Pins the log's note verifier key; else the policy's key for the checkpoint's origin, else the one
   * recorded in the state file, else GET /log/key on the first run.
   */
  readonly verifierKey?: string | undefined
  /**
   * Witnesses to pin (--witness, repeatable): a cosignature/v1 verifier key, or `<monitoring URL prefix>=<key>`
   * (as in PV_LOG_WITNESSES). Every checkpoint accepted must carry a quorum of their cosignatures; a witness
   * given with its URL is also asked for the latest checkpoint it cosigned, which must be consistent with the
   * log's.
   */
  readonly witnesses?: ReadonlyArray<string> | undefined
  /** How many of them (--quorum; default: all). */
  readonly quorum?: number | undefined
  /**
   * A C2SP tlog-policy's text (--policy FILE): its quorum must be met, its log key pins the log's, and its
   * witnesses with a URL are asked like `--witness URL=KEY`.
   */
  readonly policy?: string | undefined
  /** Each request's time limit in ms (--timeout; default 10 s). */
  readonly timeoutMs?: number | undefined
}

/** What the state file holds between runs. */
export interface MonitorState {
  readonly verifier_key: string
  readonly checkpoint: string
  readonly checked_at: string
}

export interface MonitorOutcome {
  readonly size: number
  readonly root: string
  readonly previous_size: number | undefined
}

const failed = (failure: MonitorFailure, message: string) => new LogMonitorFailed({ failure, message })

const trimmed = (baseUrl: string) => baseUrl.replace(/\/+$/, "")

/** A GET within `timeoutMs` (answer and body): its text when it answered 200, else the log is unreachable. */
const get = (url: string, timeoutMs: number) =>
  Effect.tryPromise({
    try: async () => {
      const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) })
      return { status: response.status, text: await response.text() }
    },
    catch: (error) => {
      const cause = error as Error
      const why = cause.name === "TimeoutError" ? `no complete answer within ${timeoutMs} ms` : String(cause.message ?? error)
      return failed("unreachable", `UNREACHABLE: GET ${url}: ${why}`)
    }
  }).pipe(Effect.flatMap(({ status, text }) =>
    status === 200 ? Effect.succeed(text) : Effect.fail(failed("unreachable", `UNREACHABLE: GET ${new URL(url).pathname} answered ${status}: ${text.trim().slice(0, 200)}`))))

const getJson = (url: string, timeoutMs: number) =>
  Effect.flatMap(get(url, timeoutMs), (text) =>
    Effect.try({
      try: () => {
        const value = JSON.parse(text) as unknown
        if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error("not an object")
        return value as Record<string, unknown>
      },
      catch: () => failed("unreachable", `UNREACHABLE: GET ${new URL(url).pathname} did not answer a JSON object`)
    }))

const readState = (file: string): Effect.Effect<MonitorState | undefined, LogMonitorFailed> =>
  Effect.tryPromise({
    try: () => readFile(file, "utf8"),
    catch: (error) => error as NodeJS.ErrnoException
  }).pipe(
    Effect.matchEffect({
      onFailure: (error) => error.code === "ENOENT" ? Effect.succeed(undefined) : Effect.fail(failed("state", `cannot read ${file}: ${error.message}`)),
      onSuccess: (text) =>
        Effect.try({
          try: () => {
            const state = JSON.parse(text) as MonitorState
            if (typeof state.verifier_key !== "string" || typeof state.checkpoint !== "string") throw new Error("missing members")
            return state
          },
          catch: () => failed("state", `${file} is not a monitor state file ({ verifier_key, checkpoint })`)
        })
    })
  )

/** Written beside the file and renamed over it, so a crash never leaves half a state. */
const writeState = (file: string, state: MonitorState) =>
  Effect.tryPromise({
    try: async () => {
      const temporary = `${file}.${process.pid}.tmp`
      await writeFile(temporary, JSON.stringify(state, null, 2) + "\n", { mode: 0o644 })
      await rename(temporary, file)
    },
    catch: (error) => failed("state", `cannot write ${file}: ${String((error as Error).message ?? error)}`)
  })

/** Why a consistency check failed, as the monitor reports it: only a proof that fails or signed checkpoints that disagree are a fork. */
const consistencyFailure = (failure: ConsistencyFailure): MonitorFailure => {
  switch (failure) {
    case "rollback":
    case "witness_quorum":
    case "fork":
      return failure
    case "inconsistent":
      return "fork"
    case "malformed_proof":
      return "unreachable"
    case "older_checkpoint":
      return "state"
    case "newer_checkpoint":
      return "bad_signature"
  }
}

const label = (failure: MonitorFailure) => (failure === "witness_quorum" ? "WITNESS QUORUM NOT MET" : failure.toUpperCase())

/** A consistency path fetched from the log: an answer without one is an erroring log, not a fork. */
const consistencyPath = (base: string, first: number, second: number, timeoutMs: number) =>
  first === second
    ? Effect.succeed<unknown>([])
    : Effect.map(getJson(`${base}/log/proof/consistency?first=${first}&second=${second}`, timeoutMs), (proof) => proof.consistency_path)

/**
 * C2SP tlog-witness's monitoring API: the latest checkpoint the witness cosigned for this log
 * (`GET <prefix>/<hex SHA-256 of the origin>/checkpoint`). It must be signed by the log and cosigned by
 * the witness, and the log must prove it consistent with the checkpoint the log shows this monitor
 * (either way round): a proof that fails, or two signed checkpoints of one size with different roots, is
 * a fork. A witness that is unreachable or has cosigned nothing yet is reported, not failed; a log that
 * does not answer the proof is unreachable.
 */
const askWitness = (base: string, url: string, witnessKey: string, logKey: NoteVerifier, logNote: string, timeoutMs: number) =>
  Effect.gen(function*() {
    const logCheckpoint = peekCheckpoint(logNote)
    if (!logCheckpoint.ok) return
    const originHash = createHash("sha256").update(logCheckpoint.value.origin, "utf8").digest("hex")
    const answer = yield* Effect.result(Effect.tryPromise(async () => {
      const response = await fetch(`${trimmed(url)}/${originHash}/checkpoint`, { signal: AbortSignal.timeout(timeoutMs) })
      return { status: response.status, text: await response.text() }
    }))
    if (answer._tag === "Failure" || (answer.success.status !== 200 && answer.success.status !== 404)) {
      yield* Console.log(`note: witness ${url} did not answer its monitoring checkpoint; not compared`)
      return
    }
    if (answer.success.status === 404) {
      yield* Console.log(`note: witness ${url} has cosigned no checkpoint of this log yet`)
      return
    }
    const seen = answer.success.text
    const opened = openCheckpoint(seen, logKey)
    if (!opened.ok) return yield* Effect.fail(failed("bad_signature", `BAD_SIGNATURE: the checkpoint witness ${url} serves is not the log's: ${opened.detail}`))
    const cosigned = witnessQuorumProblem(seen, { witnesses: [witnessKey], quorum: 1 })
    if (!cosigned.ok) return yield* Effect.fail(failed("witness_quorum", `WITNESS QUORUM NOT MET: the checkpoint witness ${url} serves: ${cosigned.detail}`))
    const [older, newer] = opened.value.size <= logCheckpoint.value.size ? [seen, logNote] : [logNote, seen]
    const first = Math.min(opened.value.size, logCheckpoint.value.size)
    const second = Math.max(opened.value.size, logCheckpoint.value.size)
    const path = yield* consistencyPath(base, first, second, timeoutMs).pipe(
      Effect.mapError((error) =>
        failed("unreachable", `${error.message} (asked to prove witness ${url}'s size ${opened.value.size} consistent with the log's ${logCheckpoint.value.size})`))
    )
    const verdict = verifyCheckpointConsistency(older, newer, path, logKey)
    if (!verdict.ok) {
      const failure = consistencyFailure(verdict.failure)
      return yield* Effect.fail(failed(failure, `${label(failure)}: what witness ${url} cosigned and what the log shows: ${verdict.detail}`))
    }
    yield* Console.log(`OK witness ${url} cosigned size ${opened.value.size}, consistent with the log's ${logCheckpoint.value.size}`)
  })

/** A witness pinned with --witness (`[URL=]KEY`) or by a policy's witness line. */
interface PinnedWitness {
  readonly url: string | undefined
  readonly verifierKey: string
}

/**
 * One monitoring pass over a log: fetch its latest checkpoint, check the signature with the pinned
 * key, and check it against the last checkpoint this monitor accepted (kept in the state file): a
 * smaller tree is a rollback, the same size with another root or a failing consistency proof is a
 * fork. With pinned witnesses (--witness, --quorum, or a policy), the checkpoint must also carry a
 * quorum of their valid cosignatures. An answer that is missing, late, not 200 or not the expected
 * shape makes the log unreachable, never a fork. Only a checkpoint that passes replaces the one in the
 * state file.
 */
export const logMonitorCommand = (options: LogMonitorOptions): Effect.Effect<MonitorOutcome, LogMonitorFailed> =>
  Effect.gen(function*() {
    const base = trimmed(options.baseUrl)
    const timeoutMs = options.timeoutMs ?? DefaultMonitorTimeoutMs
    const policy = options.policy === undefined ? undefined : parsePolicy(options.policy)
    if (policy !== undefined && !policy.ok) return yield* Effect.fail(failed("bad_key", `the policy: ${policy.detail}`))
    const state = yield* readState(options.state)
    const note = yield* get(`${base}/log/checkpoint`, timeoutMs)
    const peeked = peekCheckpoint(note)
    if (!peeked.ok) return yield* Effect.fail(failed("unreachable", `UNREACHABLE: GET /log/checkpoint did not answer a signed checkpoint: ${peeked.detail}`))
    const policyKey = policy === undefined ? undefined : verifySync(policyLogKey(policy.value, peeked.value.origin))
    const given = options.verifierKey ?? (policyKey === undefined ? undefined : verifierKeyOf(policyKey.name, policyKey.publicKey))
    if (given !== undefined && state !== undefined && state.verifier_key !== given) {
      const source = options.verifierKey === undefined ? "the policy's log key" : "--verifier-key"
      return yield* Effect.fail(failed("bad_key", `${source} differs from the key pinned in ${options.state} (${state.verifier_key})`))
    }
    let verifierKey = given ?? state?.verifier_key
    if (verifierKey === undefined) {
      const key = yield* getJson(`${base}/log/key`, timeoutMs)
      if (typeof key.verifier_key !== "string") return yield* Effect.fail(failed("unreachable", "UNREACHABLE: GET /log/key has no verifier_key"))
      verifierKey = key.verifier_key
      yield* Console.log(`pinned the log key from ${base}/log/key (first run): ${verifierKey}`)
    }
    const parsedKey = parseVerifierKey(verifierKey)
    if (!parsedKey.ok) return yield* Effect.fail(failed("bad_key", `the verifier key is not usable: ${parsedKey.detail}`))
    const opened = openCheckpoint(note, parsedKey.value)
    if (!opened.ok) return yield* Effect.fail(failed("bad_signature", `BAD_SIGNATURE: the checkpoint does not verify with ${verifierKey}: ${opened.detail}`))
    const current = opened.value
    const pinned: ReadonlyArray<PinnedWitness> = [
      ...(options.witnesses ?? []).map((entry) => parseLogWitness(entry) ?? { url: undefined, verifierKey: entry }),
      ...(policy?.value.witnesses ?? []).map((w) => ({ url: w.url, verifierKey: w.vkey }))
    ]
    const witnesses: WitnessPolicy = {
      ...(options.witnesses === undefined || options.witnesses.length === 0 ? {} : { witnesses: options.witnesses.map((entry) => parseLogWitness(entry)?.verifierKey ?? entry) }),
      ...(options.quorum === undefined ? {} : { quorum: options.quorum }),
      ...(policy === undefined ? {} : { policy: policy.value })
    }
    if (hasWitnesses(witnesses)) {
      const quorum = witnessQuorumProblem(note, witnesses)
      if (!quorum.ok) return yield* Effect.fail(failed("witness_quorum", `WITNESS QUORUM NOT MET for the checkpoint of size ${current.size}: ${quorum.detail}`))
      yield* Console.log(`OK ${quorum.detail}`)
    }
    let previousSize: number | undefined
    if (state !== undefined) {
      const previous = peekCheckpoint(state.checkpoint)
      if (!previous.ok) return yield* Effect.fail(failed("state", `the checkpoint in ${options.state} is malformed: ${previous.detail}`))
      previousSize = previous.value.size
      if (current.size < previous.value.size) {
        return yield* Effect.fail(failed("rollback", `ROLLBACK: the log now shows size ${current.size}, below the ${previous.value.size} it showed before`))
      }
      const path = yield* consistencyPath(base, previous.value.size, current.size, timeoutMs)
      const verdict = verifyCheckpointConsistency(state.checkpoint, note, path, parsedKey.value, witnesses)
      if (!verdict.ok) {
        const failure = consistencyFailure(verdict.failure)
        return yield* Effect.fail(failed(failure, `${label(failure)}: ${verdict.detail}`))
      }
      yield* Console.log(`OK ${verdict.detail}`)
    } else {
      yield* Console.log(`OK first checkpoint recorded`)
    }
    for (const witness of pinned) {
      if (witness.url !== undefined) yield* askWitness(base, witness.url, witness.verifierKey, parsedKey.value, note, timeoutMs)
    }
    yield* writeState(options.state, { verifier_key: verifierKey, checkpoint: note, checked_at: new Date().toISOString() })
    yield* Console.log(`size ${current.size}, root ${hexOf(current.root)}`)
    return { size: current.size, root: hexOf(current.root), previous_size: previousSize }
  })
