/**
 * The relying party's verifiers are written once (this directory) and run in two worlds: Node, where
 * node:crypto answers synchronously and the client module's API stays synchronous, and the browser,
 * where WebCrypto answers with promises. A verifier is a generator that yields each crypto operation
 * it needs and receives the answer; `runSync` and `runAsync` answer them. Nothing here imports Node:
 * the page's bundle (src/web/verifier.ts) is built from these files.
 */

export type Op =
  | { readonly op: "sha256"; readonly data: Uint8Array }
  /** Whether 32 raw bytes are an Ed25519 public key the crypto provider accepts. */
  | { readonly op: "ed25519-key"; readonly publicKey: Uint8Array }
  | { readonly op: "ed25519-verify"; readonly publicKey: Uint8Array; readonly message: Uint8Array; readonly signature: Uint8Array }

/** A verification that needs crypto, returning A: run it with runSync or runAsync. */
export type Verifying<A> = Generator<Op, A, unknown>

/**
 * The three primitives. Neither Ed25519 operation throws: a key the provider refuses is not usable,
 * and a signature that cannot be checked does not verify.
 */
export interface SyncCrypto {
  readonly sha256: (data: Uint8Array) => Uint8Array
  readonly ed25519Key: (publicKey: Uint8Array) => boolean
  readonly ed25519Verify: (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array) => boolean
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

const perform = <C extends SyncCrypto | AsyncCrypto>(crypto: C, op: Op): ReturnType<C["sha256"]> | ReturnType<C["ed25519Key"]> => {
  switch (op.op) {
    case "sha256":
      return crypto.sha256(op.data) as ReturnType<C["sha256"]>
    case "ed25519-key":
      return crypto.ed25519Key(op.publicKey) as ReturnType<C["ed25519Key"]>
    case "ed25519-verify":
      return crypto.ed25519Verify(op.publicKey, op.message, op.signature) as ReturnType<C["ed25519Key"]>
  }
}

export const runSync = <A>(program: Verifying<A>, crypto: SyncCrypto): A => {
  let step = program.next()
  while (!step.done) step = program.next(perform(crypto, step.value))
  return step.value
}

export const runAsync = async <A>(program: Verifying<A>, crypto: AsyncCrypto): Promise<A> => {
  let step = program.next()
  while (!step.done) step = program.next(await perform(crypto, step.value))
  return step.value
}
