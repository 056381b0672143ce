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

/** RFC 9162 §2.1.3.2: does `path` prove `leaf` at `index` in the tree of `size` leaves with `root`? */
export function* verifyInclusion(proof: {
  readonly index: number
  readonly size: number
  readonly leaf: Uint8Array
  readonly path: ReadonlyArray<Uint8Array>
  readonly root: Uint8Array
}): Verifying<boolean> {
  const { index, size, leaf, path, root } = proof
  if (!isSize(index) || !isSize(size) || index >= size) return false
  if (!isHash(leaf) || !isHash(root) || !Array.isArray(path) || !path.every(isHash)) return false
  let fn = index
  let sn = size - 1
  let r = leaf
  for (const p of path) {
    if (sn === 0) return false
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
  return sn === 0 && bytesEqual(r, root)
}
