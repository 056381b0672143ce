import { createHash } from "node:crypto"
import { readFile, rename, writeFile } from "node:fs/promises"
import { Console, Data, Effect } from "effect"
import { verifyCheckpointConsistency, witnessQuorumProblem } from "../client/log.js"
import { openCheckpoint, peekCheckpoint } from "../log/Checkpoint.js"
import { hexOf } from "../log/Merkle.js"
import { parseVerifierKey, type NoteVerifier } from "../log/Note.js"
import { parseLogWitness } from "../platform/Config.js"

export type MonitorFailure = "unreachable" | "bad_key" | "bad_signature" | "witness_quorum" | "rollback" | "fork" | "state"

/** `pv log monitor` found a problem (or could not check): the message says which. */
export class LogMonitorFailed extends Data.TaggedError("LogMonitorFailed")<{ readonly failure: MonitorFailure; readonly message: string }> {}

export interface LogMonitorOptions {
  readonly baseUrl: string
  /** Keeps the pinned key and the last checkpoint that passed. */
  readonly state: string
  /** Pins the log's note verifier key; else the one recorded in the state file, else GET /log/key on the first run. */
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

const get = (url: string) =>
  Effect.tryPromise({
    try: async () => {
      const response = await fetch(url)
      return { status: response.status, text: await response.text() }
    },
    catch: (error) => failed("unreachable", `cannot reach ${new URL(url).origin}: ${String((error as Error).message ?? error)}`)
  }).pipe(Effect.flatMap(({ status, text }) =>
    status === 200 ? Effect.succeed(text) : Effect.fail(failed("unreachable", `GET ${new URL(url).pathname} answered ${status}: ${text.slice(0, 200)}`))))

const getJson = (url: string) =>
  Effect.flatMap(get(url), (text) =>
    Effect.try({ try: () => JSON.parse(text) as Record<string, unknown>, catch: () => failed("unreachable", `GET ${new URL(url).pathname} did not answer JSON`) }))

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

/**
 * C2SP tlog-witness's monitoring API: the latest checkpoint the witness cosigned for this log
 * (`GET <prefix>/<hex SHA-256 of the origin>/checkpoint`). It must be signed by the log and cosigned by
 * the witness, and the log must prove it consistent with the checkpoint the log shows this monitor
 * (either way round): otherwise the log showed the witness another history, a fork. A witness that is
 * unreachable or has cosigned nothing yet is reported, not failed.
 */
const askWitness = (base: string, url: string, witnessKey: string, logKey: NoteVerifier, logNote: string) =>
  Effect.gen(function*() {
    const logCheckpoint = peekCheckpoint(logNote)
    if (!logCheckpoint.ok) return
    const originHash = createHash("sha256").update(logCheckpoint.value.origin, "utf8").digest("hex")
    const answer = yield* Effect.result(Effect.tryPromise(async () => {
      const response = await fetch(`${trimmed(url)}/${originHash}/checkpoint`)
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
    if (!opened.ok) return yield* Effect.fail(failed("bad_signature", `the checkpoint witness ${url} serves is not the log's: ${opened.detail}`))
    const cosigned = witnessQuorumProblem(seen, { witnesses: [witnessKey], quorum: 1 })
    if (!cosigned.ok) return yield* Effect.fail(failed("witness_quorum", `the checkpoint witness ${url} serves: ${cosigned.detail}`))
    const [older, newer] = opened.value.size <= logCheckpoint.value.size ? [seen, logNote] : [logNote, seen]
    const first = Math.min(opened.value.size, logCheckpoint.value.size)
    const second = Math.max(opened.value.size, logCheckpoint.value.size)
    let path: unknown = []
    if (first !== second) {
      const proof = yield* Effect.result(getJson(`${base}/log/proof/consistency?first=${first}&second=${second}`))
      if (proof._tag === "Failure") {
        return yield* Effect.fail(failed("fork", `FORK: witness ${url} cosigned a tree of size ${opened.value.size} that the log cannot prove consistent with its size ${logCheckpoint.value.size}: ${proof.failure.message}`))
      }
      path = proof.success.consistency_path
    }
    const verdict = verifyCheckpointConsistency(older, newer, path, logKey)
    if (!verdict.ok) return yield* Effect.fail(failed("fork", `FORK: what witness ${url} cosigned and what the log shows differ: ${verdict.detail}`))
    yield* Console.log(`OK witness ${url} cosigned size ${opened.value.size}, consistent with the log's ${logCheckpoint.value.size}`)
  })

/**
 * One monitoring pass over a log: fetch its latest checkpoint, check the signature with the pinned
 * key, and check it against the last checkpoint this monitor accepted (kept in the state file): a
 * smaller tree is a rollback, the same size with another root or a failing consistency proof is a
 * fork. With pinned witnesses (--witness, --quorum), the checkpoint must also carry a quorum of their
 * valid cosignatures. Only a checkpoint that passes replaces the one in the state file.
 */
export const logMonitorCommand = (options: LogMonitorOptions): Effect.Effect<MonitorOutcome, LogMonitorFailed> =>
  Effect.gen(function*() {
    const base = trimmed(options.baseUrl)
    const state = yield* readState(options.state)
    if (options.verifierKey !== undefined && state !== undefined && state.verifier_key !== options.verifierKey) {
      return yield* Effect.fail(failed("bad_key", `--verifier-key differs from the key pinned in ${options.state} (${state.verifier_key})`))
    }
    let verifierKey = options.verifierKey ?? state?.verifier_key
    if (verifierKey === undefined) {
      const key = yield* getJson(`${base}/log/key`)
      if (typeof key.verifier_key !== "string") return yield* Effect.fail(failed("bad_key", "GET /log/key has no verifier_key"))
      verifierKey = key.verifier_key
      yield* Console.log(`pinned the log key from ${base}/log/key (first run): ${verifierKey}`)
    }
    const parsedKey = parseVerifierKey(verifierKey)
    if (!parsedKey.ok) return yield* Effect.fail(failed("bad_key", `the verifier key is not usable: ${parsedKey.detail}`))
    const note = yield* get(`${base}/log/checkpoint`)
    const opened = openCheckpoint(note, parsedKey.value)
    if (!opened.ok) return yield* Effect.fail(failed("bad_signature", `the checkpoint does not verify with ${verifierKey}: ${opened.detail}`))
    const current = opened.value
    const pinned = (options.witnesses ?? []).map((entry) => parseLogWitness(entry) ?? { url: undefined, verifierKey: entry })
    const policy = { witnesses: pinned.map((w) => w.verifierKey), ...(options.quorum === undefined ? {} : { quorum: options.quorum }) }
    if (policy.witnesses.length > 0) {
      const quorum = witnessQuorumProblem(note, policy)
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
      const path = current.size === previous.value.size
        ? []
        : (yield* getJson(`${base}/log/proof/consistency?first=${previous.value.size}&second=${current.size}`)).consistency_path
      const verdict = verifyCheckpointConsistency(state.checkpoint, note, path, parsedKey.value, policy)
      if (!verdict.ok) {
        const failure = verdict.failure === "rollback" || verdict.failure === "witness_quorum"
          ? verdict.failure
          : verdict.failure === "newer_checkpoint" || verdict.failure === "older_checkpoint" ? "bad_signature" : "fork"
        return yield* Effect.fail(failed(failure, `${failure === "fork" ? "FORK" : failure.toUpperCase()}: ${verdict.detail}`))
      }
      yield* Console.log(`OK ${verdict.detail}`)
    } else {
      yield* Console.log(`OK first checkpoint recorded`)
    }
    for (const witness of pinned) {
      if (witness.url !== undefined) yield* askWitness(base, witness.url, witness.verifierKey, parsedKey.value, note)
    }
    yield* writeState(options.state, { verifier_key: verifierKey, checkpoint: note, checked_at: new Date().toISOString() })
    yield* Console.log(`size ${current.size}, root ${hexOf(current.root)}`)
    return { size: current.size, root: hexOf(current.root), previous_size: previousSize }
  })
