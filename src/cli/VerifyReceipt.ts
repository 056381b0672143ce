import { readFile } from "node:fs/promises"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { type BundleVerdict, evidenceKindOf, type EvidenceVerdict, parsePolicy, verifyEvidence, verifyReceiptBundle } from "../client/log.js"

/** `pv verify-receipt` failed: a step failed, or the bundle or a key could not be read. The message says which. */
export class VerifyReceiptFailed extends Data.TaggedError("VerifyReceiptFailed")<{ readonly message: string }> {}

export interface VerifyReceiptOptions {
  /**
   * Saved evidence, recognised by content: a proof bundle (GET /reliance-receipts/{id}/proof), a C2SP
   * tlog-proof (…/tlog-proof), an RFC 9942 COSE Receipt (…/cose-receipt) or an RFC 9943 Transparent
   * Statement (…/transparent-statement).
   */
  readonly file: string
  /** The receipt (GET /reliance-receipts/{id}) a bare COSE Receipt proves, which does not carry it (--receipt). */
  readonly receipt?: string | undefined
  /** The log's note verifier key to pin (GET /log/key `verifier_key`). */
  readonly verifierKey?: string | undefined
  /** The receipt-signing keys to pin: a saved GET /events/keys document. */
  readonly jwks?: string | undefined
  /** Witness cosignature/v1 verifier keys to pin (--witness, repeatable). */
  readonly witnesses?: ReadonlyArray<string> | undefined
  /** How many of them must have cosigned the checkpoint (--quorum; default: all). */
  readonly quorum?: number | undefined
  /** A C2SP tlog-policy file (--policy): its quorum must be met; its log key pins the log's unless --verifier-key does. */
  readonly policy?: string | undefined
}

const failed = (message: string) => new VerifyReceiptFailed({ message })

const readJson = (file: string, what: string) =>
  Effect.tryPromise({
    try: async () => JSON.parse(await readFile(file, "utf8")) as unknown,
    catch: (error) => failed(`cannot read ${what} ${file}: ${String((error as Error).message ?? error)}`)
  })

/** A policy file, parsed: an error names the file and the line. */
const readPolicy = (file: string) =>
  Effect.tryPromise({
    try: () => readFile(file, "utf8"),
    catch: (error) => failed(`cannot read the policy ${file}: ${String((error as Error).message ?? error)}`)
  }).pipe(Effect.flatMap((text) => {
    const parsed = parsePolicy(text)
    return parsed.ok ? Effect.succeed(parsed.value) : Effect.fail(failed(`the policy ${file}: ${parsed.detail}`))
  }))

const readBytes = (file: string, what: string) =>
  Effect.tryPromise({
    try: async () => new Uint8Array(await readFile(file)),
    catch: (error) => failed(`cannot read ${what} ${file}: ${String((error as Error).message ?? error)}`)
  })

const mark = (step: { readonly ok: boolean; readonly checked: boolean }) => (!step.checked ? "-" : step.ok ? "✓" : "✗")

/**
 * Checks a receipt's proof bundle offline, step by step (digest → entry → leaf → inclusion →
 * checkpoint signature → [witness cosignatures, with --witness] → receipt signature), prints each step, and fails naming the first failing
 * step. Without pinned keys the bundle's own are used, which proves only that it agrees with itself.
 */
export const verifyReceiptCommand = (options: VerifyReceiptOptions): Effect.Effect<BundleVerdict | EvidenceVerdict, VerifyReceiptFailed> =>
  Effect.gen(function*() {
    const input = yield* readBytes(options.file, "the evidence")
    const kind = evidenceKindOf(input)
    const jwks = options.jwks === undefined ? undefined : yield* readJson(options.jwks, "the JWKS")
    if (jwks !== undefined && (typeof jwks !== "object" || jwks === null || !Array.isArray((jwks as { keys?: unknown }).keys))) {
      return yield* Effect.fail(failed(`${options.jwks} is not a JWKS ({ "keys": [...] }, as GET /api/v1/events/keys returns)`))
    }
    const policy = options.policy === undefined ? undefined : yield* readPolicy(options.policy)
    if (kind === undefined) {
      return yield* Effect.fail(failed(`${options.file} is neither a proof bundle (JSON), a tlog-proof, a COSE Receipt nor a Transparent Statement`))
    }
    if (kind !== "bundle") return yield* verifyEncoded(input, kind, options, jwks as { keys: ReadonlyArray<unknown> } | undefined)
    const bundle = yield* readJson(options.file, "the bundle")
    const verdict = verifyReceiptBundle(bundle, {
      ...(policy === undefined ? {} : { policy }),
      ...(options.verifierKey === undefined ? {} : { verifierKey: options.verifierKey }),
      ...(jwks === undefined ? {} : { receiptKeys: jwks as { keys: ReadonlyArray<unknown> } }),
      ...(options.witnesses === undefined ? {} : { witnesses: options.witnesses }),
      ...(options.quorum === undefined ? {} : { quorum: options.quorum })
    })
    for (const step of verdict.steps) yield* Console.log(`${mark(step)} ${step.step}: ${step.detail}`)
    if (verdict.keys.verifier_key === "bundle") yield* Console.log("note: the log key was not pinned (--verifier-key): the bundle vouched for itself")
    if ((options.witnesses === undefined || options.witnesses.length === 0) && policy === undefined) {
      yield* Console.log("note: no witness was pinned (--witness): nothing shows that others saw the same checkpoint")
    }
    if (verdict.keys.receipt_key === "bundle") yield* Console.log("note: the receipt key was not pinned (--jwks): the bundle vouched for itself")
    if (verdict.failed_step !== undefined) {
      const first = verdict.steps.find((step) => step.step === verdict.failed_step)!
      return yield* Effect.fail(failed(`FAILED at step ${verdict.failed_step}: ${first.detail}`))
    }
    if (!verdict.ok) return yield* Effect.fail(failed(`NOT VERIFIED: step(s) ${verdict.not_checked.join(", ")} could not be checked`))
    const receipt = (bundle as { receipt?: { receipt_id?: unknown } }).receipt
    yield* Console.log(`OK receipt ${String(receipt?.receipt_id)} is signed and in the log at index ${String((bundle as { leaf_index?: unknown }).leaf_index)}`)
    return verdict
  })

/** A tlog-proof, COSE Receipt or Transparent Statement: its steps printed, failing at the first that failed. */
const verifyEncoded = (
  input: Uint8Array,
  kind: Exclude<EvidenceVerdict["kind"], "bundle">,
  options: VerifyReceiptOptions,
  jwks: { keys: ReadonlyArray<unknown> } | undefined
): Effect.Effect<EvidenceVerdict, VerifyReceiptFailed> =>
  Effect.gen(function*() {
    const receipt = options.receipt === undefined ? undefined : yield* readJson(options.receipt, "the receipt")
    const verdict = verifyEvidence(input, {
      ...(options.verifierKey === undefined ? {} : { verifierKey: options.verifierKey }),
      ...(jwks === undefined ? {} : { receiptKeys: jwks }),
      ...(options.witnesses === undefined ? {} : { witnesses: options.witnesses }),
      ...(options.quorum === undefined ? {} : { quorum: options.quorum }),
      ...(receipt === undefined ? {} : { receipt })
    })
    yield* Console.log(`${options.file}: ${kind}`)
    for (const step of verdict.steps) yield* Console.log(`${mark(step)} ${step.step}: ${step.detail}`)
    if (verdict.failed_step !== undefined) {
      const first = verdict.steps.find((step) => step.checked && !step.ok)!
      return yield* Effect.fail(failed(`FAILED at step ${verdict.failed_step}: ${first.detail}`))
    }
    if (!verdict.ok) return yield* Effect.fail(failed(`NOT VERIFIED: step(s) ${verdict.not_checked.join(", ")} could not be checked (pin --verifier-key and --jwks)`))
    yield* Console.log(`OK the ${kind} verifies`)
    return verdict
  })
