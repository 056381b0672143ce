import { bytesEqual, concat } from "./Bytes.js"
import { sha256, type Verifying } from "./Run.js"

/** RFC 9162 §2.1 hashing and inclusion checks, as a relying party needs them (src/log/Merkle.ts builds trees). */

const isSize = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0
const isHash = (u: unknown): u is Uint8Array => u instanceof Uint8Array && u.length === 32

/** MTH({d}) = SHA-256(0x00 ‖ d). */
export const leafHash = (entry: Uint8Array): Verifying<Uint8Array> => sha256(concat(Uint8Array.of(0x00), entry))

/** SHA-256(0x01 ‖ left ‖ right). */
export const nodeHash = (left: Uint8Array, right: Uint8Array): Verifying<Uint8Array> => sha256(concat(Uint8Array.of(0x01), left, right))

const half = (n: number) => Math.floor(n / 2)
const isOdd = (n: number) => n % 2 === 1

/**
 * RFC 9162 §2.1.3.2: the root `path` leads to from `leaf` at `index` in a tree of `size` leaves, or
 * undefined when the path cannot be a proof there (an index outside the tree, a path too long or too short).
 */
export function* rootFromInclusion(proof: {
  readonly index: number
  readonly size: number
  readonly leaf: Uint8Array
  readonly path: ReadonlyArray<Uint8Array>
}): Verifying<Uint8Array | undefined> {
  const { index, size, leaf, path } = proof
  if (!isSize(index) || !isSize(size) || index >= size) return undefined
  if (!isHash(leaf) || !Array.isArray(path) || !path.every(isHash)) return undefined
  let fn = index
  let sn = size - 1
  let r = leaf
  for (const p of path) {
    if (sn === 0) return undefined
    if (isOdd(fn) || fn === sn) {
      r = yield* nodeHash(p, r)
      while (!isOdd(fn) && fn !== 0) {
        fn = half(fn)
        sn = half(sn)
      }
    } else {
      r = yield* nodeHash(r, p)
    }
    fn = half(fn)
    sn = half(sn)
  }
  return sn === 0 ? r : undefined
}

/** RFC 9162 §2.1.3.2: does `path` prove `leaf` at `index` in the tree of `size` leaves with `root`? */
export function* verifyInclusion(proof: {
  readonly index: number
  readonly size: number
  readonly leaf: Uint8Array
  readonly path: ReadonlyArray<Uint8Array>
  readonly root: Uint8Array
}): Verifying<boolean> {
  if (!isHash(proof.root)) return false
  const computed = yield* rootFromInclusion(proof)
  return computed !== undefined && bytesEqual(computed, proof.root)
}
