/**
 * The relying party's verifiers are written once (this directory) and run in two worlds: Node, where
 * node:crypto answers synchronously and the client module's API stays synchronous, and the browser,
 * where WebCrypto answers with promises. A verifier is a generator that yields each crypto operation
 * it needs and receives the answer; `runSync` and `runAsync` answer them. Nothing here imports Node:
 * the page's bundle (src/web/verifier.ts) is built from these files.
 */

import { hashFromHex, hexOf, signatureBytes, utf8 } from "./Bytes.js"

export type Op =
  | { readonly op: "sha256"; readonly data: Uint8Array }
  /** Whether 32 raw bytes are an Ed25519 public key the crypto provider accepts. */
  | { readonly op: "ed25519-key"; readonly publicKey: Uint8Array }
  | { readonly op: "ed25519-verify"; readonly publicKey: Uint8Array; readonly message: Uint8Array; readonly signature: Uint8Array }
  | EventOp

/**
 * Both crypto checks of one signed event in one hand-off (a chain asks for thousands): the SHA-256 hex
 * of `text`'s UTF-8, and whether `signature` — unpadded base64url text, canonical only — verifies with
 * `publicKey` (undefined: no key, so it does not) over the 32 bytes `hash` spells in lowercase hex.
 * The two are independent (the signature covers the claimed hash, not the recomputed one).
 */
export interface EventOp {
  readonly op: "event"
  readonly text: string
  readonly publicKey: Uint8Array | undefined
  readonly hash: string
  readonly signature: string
}

export interface EventAnswer {
  readonly hash: string
  readonly signature: boolean
}

/** A verification that needs crypto, returning A: run it with runSync or runAsync. */
export type Verifying<A> = Generator<Op, A, unknown>

/**
 * The three primitives. Neither Ed25519 operation throws: a key the provider refuses is not usable,
 * and a signature that cannot be checked does not verify. The optional two are the event check's hot
 * path taken without the portable codecs; left out, the runner composes them from the primitives
 * (`eventCheck`), and given, they must answer exactly as that does.
 */
export interface SyncCrypto {
  readonly sha256: (data: Uint8Array) => Uint8Array
  readonly ed25519Key: (publicKey: Uint8Array) => boolean
  readonly ed25519Verify: (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array) => boolean
  /** SHA-256 hex of the UTF-8 of `text`. */
  readonly sha256Text?: (text: string) => string
  /** `signature` (base64url text) over the 32 bytes `hash` (hex text) spells, as EventOp describes. */
  readonly ed25519VerifyText?: (publicKey: Uint8Array, hash: string, signature: string) => boolean
}

export interface AsyncCrypto {
  readonly sha256: (data: Uint8Array) => Promise<Uint8Array>
  readonly ed25519Key: (publicKey: Uint8Array) => Promise<boolean>
  readonly ed25519Verify: (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array) => Promise<boolean>
}

export function* sha256(data: Uint8Array): Verifying<Uint8Array> {
  return (yield { op: "sha256", data }) as Uint8Array
}

export function* ed25519Key(publicKey: Uint8Array): Verifying<boolean> {
  return (yield { op: "ed25519-key", publicKey }) as boolean
}

export function* ed25519Verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): Verifying<boolean> {
  return (yield { op: "ed25519-verify", publicKey, message, signature }) as boolean
}

/** One event's checks (EventOp); the chain verifier yields this op directly, without a generator of its own. */
export const eventCheck = (text: string, publicKey: Uint8Array | undefined, hash: string, signature: string): EventOp =>
  ({ op: "event", text, publicKey, hash, signature })

const syncEvent = (crypto: SyncCrypto, op: EventOp): EventAnswer => {
  const hash = crypto.sha256Text !== undefined ? crypto.sha256Text(op.text) : hexOf(crypto.sha256(utf8(op.text)))
  if (op.publicKey === undefined) return { hash, signature: false }
  if (crypto.ed25519VerifyText !== undefined) return { hash, signature: crypto.ed25519VerifyText(op.publicKey, op.hash, op.signature) }
  const sig = signatureBytes(op.signature)
  const message = hashFromHex(op.hash)
  return { hash, signature: sig !== undefined && message !== undefined && crypto.ed25519Verify(op.publicKey, message, sig) }
}

const asyncEvent = async (crypto: AsyncCrypto, op: EventOp): Promise<EventAnswer> => {
  const sig = signatureBytes(op.signature)
  const message = hashFromHex(op.hash)
  // The two are independent: ask for both at once.
  const [digest, signature] = await Promise.all([
    crypto.sha256(utf8(op.text)),
    op.publicKey !== undefined && sig !== undefined && message !== undefined ? crypto.ed25519Verify(op.publicKey, message, sig) : false
  ])
  return { hash: hexOf(digest), signature }
}

export const runSync = <A>(program: Verifying<A>, crypto: SyncCrypto): A => {
  let step = program.next()
  while (!step.done) {
    const op = step.value
    switch (op.op) {
      case "event":
        step = program.next(syncEvent(crypto, op))
        break
      case "sha256":
        step = program.next(crypto.sha256(op.data))
        break
      case "ed25519-key":
        step = program.next(crypto.ed25519Key(op.publicKey))
        break
      case "ed25519-verify":
        step = program.next(crypto.ed25519Verify(op.publicKey, op.message, op.signature))
        break
    }
  }
  return step.value
}

const performAsync = (crypto: AsyncCrypto, op: Op): Promise<unknown> => {
  switch (op.op) {
    case "event":
      return asyncEvent(crypto, op)
    case "sha256":
      return crypto.sha256(op.data)
    case "ed25519-key":
      return crypto.ed25519Key(op.publicKey)
    case "ed25519-verify":
      return crypto.ed25519Verify(op.publicKey, op.message, op.signature)
  }
}

export const runAsync = async <A>(program: Verifying<A>, crypto: AsyncCrypto): Promise<A> => {
  let step = program.next()
  while (!step.done) step = program.next(await performAsync(crypto, step.value))
  return step.value
}
