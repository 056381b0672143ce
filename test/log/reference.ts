import { hash } from "node:crypto"

/**
 * RFC 9162 §2.1 restated over plain arrays of leaf hashes, straight from the definitions (MTH, PATH,
 * PROOF/SUBPROOF), with no stored subtrees: the oracle the log's implementation is compared with.
 */
// One-shot SHA-256 of the parts joined: about half the CPU of a `createHash` object per call, and the log's tests
// hash a few million times through this oracle.
const sha256 = (...parts: ReadonlyArray<Uint8Array>): Buffer => hash("sha256", Buffer.concat(parts), "buffer")

export const refLeaf = (data: Uint8Array): Buffer => sha256(Buffer.of(0), data)
export const refNode = (left: Uint8Array, right: Uint8Array): Buffer => sha256(Buffer.of(1), left, right)

/** The largest power of two strictly below n. */
const kOf = (n: number) => {
  let k = 1
  while (k * 2 < n) k *= 2
  return k
}

/**
 * MTH(D[lo:hi]); ranges instead of slices so that trees of 65,536 leaves stay cheap. With `known`, the hash of
 * every range computed is kept there (by lo·2^32 + hi) and taken from there the next time.
 */
const mthOf = (leaves: ReadonlyArray<Uint8Array>, lo: number, hi: number, known?: Map<number, Buffer>): Buffer => {
  if (hi - lo === 0) return sha256()
  if (hi - lo === 1) return Buffer.from(leaves[lo]!)
  const key = lo * 2 ** 32 + hi
  const kept = known?.get(key)
  if (kept !== undefined) return kept
  const k = kOf(hi - lo)
  const mth = refNode(mthOf(leaves, lo, lo + k, known), mthOf(leaves, lo + k, hi, known))
  known?.set(key, mth)
  return mth
}

export const refMth = (leaves: ReadonlyArray<Uint8Array>, size = leaves.length): Buffer => mthOf(leaves, 0, size)

/**
 * refMth of one array of leaves at many sizes, for a test that asks for the roots of one log as it grows: the
 * same definition, keeping the hash of every range it computed (trees of different sizes share most of their
 * ranges), so each further size costs the few ranges on its right edge instead of the whole tree again. The
 * leaves must not change while it is in use.
 */
export const refMthOfSizes = (leaves: ReadonlyArray<Uint8Array>): ((size?: number) => Buffer) => {
  const known = new Map<number, Buffer>()
  return (size = leaves.length) => mthOf(leaves, 0, size, known)
}

export const refPath = (m: number, leaves: ReadonlyArray<Uint8Array>): Array<Buffer> => {
  if (leaves.length <= 1) return []
  const k = kOf(leaves.length)
  return m < k
    ? [...refPath(m, leaves.slice(0, k)), refMth(leaves.slice(k))]
    : [...refPath(m - k, leaves.slice(k)), refMth(leaves.slice(0, k))]
}

const refSubproof = (m: number, leaves: ReadonlyArray<Uint8Array>, whole: boolean): Array<Buffer> => {
  const n = leaves.length
  if (m === n) return whole ? [] : [refMth(leaves)]
  const k = kOf(n)
  return m <= k
    ? [...refSubproof(m, leaves.slice(0, k), whole), refMth(leaves.slice(k))]
    : [...refSubproof(m - k, leaves.slice(k), false), refMth(leaves.slice(0, k))]
}

export const refProof = (m: number, leaves: ReadonlyArray<Uint8Array>): Array<Buffer> =>
  m === 0 || m === leaves.length ? [] : refSubproof(m, leaves, true)

/** Distinct, cheap leaf hashes: the leaf hash of "<salt>:<i>". */
export const syntheticLeaves = (count: number, salt = "leaf"): Array<Buffer> =>
  Array.from({ length: count }, (_, i) => refLeaf(Buffer.from(`${salt}:${i}`)))

export const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex")

/** A copy with one bit flipped: never mutates what a tree or a cache still holds. */
export const flipBit = (bytes: Uint8Array, bit: number): Buffer => {
  const copy = Buffer.from(bytes)
  const at = Math.floor(bit / 8) % copy.length
  copy[at] = copy[at]! ^ (1 << (bit % 8))
  return copy
}
