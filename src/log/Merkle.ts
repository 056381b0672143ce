import { hash } from "node:crypto"
import { verifyInclusion as verifyInclusionWith } from "../verify/Merkle.js"
import { verifySync } from "../verify/NodeCrypto.js"

/**
 * The Merkle tree of the transparency log (RFC 9162 §2.1, SHA-256): tree hashes, inclusion and
 * consistency proofs, and their verification. Hashes are 32 raw bytes; lowercase hex only at the
 * JSON boundary. Sizes and indexes are safe integers, so all arithmetic avoids 32-bit bit operators.
 */
export type Hash = Uint8Array

export const HashSize = 32


/** One-shot SHA-256 (`crypto.hash`: about half the CPU of a `createHash` object per call, which counts in proofs). */
const sha256 = (data: Uint8Array): Hash => hash("sha256", data, "buffer")

/** The input of one interior node's hash, reused: 0x01 ‖ left ‖ right (hashing is synchronous). */
const nodeInput = new Uint8Array(1 + 2 * HashSize)
nodeInput[0] = 0x01

/** MTH({}) = SHA-256 of the empty string. */
export const emptyTreeHash: Hash = sha256(new Uint8Array(0))

/** MTH({d}) = SHA-256(0x00 ‖ d). */
export const leafHash = (entry: Uint8Array): Hash => {
  const input = new Uint8Array(1 + entry.length)
  input.set(entry, 1)
  return sha256(input)
}

/** SHA-256(0x01 ‖ left ‖ right). */
export const nodeHash = (left: Hash, right: Hash): Hash => {
  if (left.length !== HashSize || right.length !== HashSize) return sha256(Buffer.concat([nodeInput.subarray(0, 1), left, right]))
  nodeInput.set(left, 1)
  nodeInput.set(right, 1 + HashSize)
  return sha256(nodeInput)
}

export const hashEquals = (a: Uint8Array, b: Uint8Array): boolean =>
  a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length))

export const hexOf = (hash: Uint8Array): string => Buffer.from(hash.buffer, hash.byteOffset, hash.length).toString("hex")

const HexHashPattern = /^[0-9a-f]{64}$/

/** A hash from its wire form: exactly 64 lowercase hex characters, nothing else. */
export const hashFromHex = (hex: unknown): Hash | undefined =>
  typeof hex === "string" && HexHashPattern.test(hex) ? Buffer.from(hex, "hex") : undefined

const isHash = (u: unknown): u is Hash => u instanceof Uint8Array && u.length === HashSize

/**
 * The hash of the complete subtree of 2^height leaves D[index·2^height : (index+1)·2^height].
 * Complete subtrees never change once the log has grown past them, so a store can keep them
 * (tiles, rows) and this is all proof generation needs.
 */
export type SubtreeHash = (height: number, index: number) => Hash

const isSize = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0

/** The largest power of two strictly below n (n >= 2), with its height. */
const splitOf = (n: number): { readonly k: number; readonly height: number } => {
  let k = 1
  let height = 0
  while (k * 2 < n) {
    k *= 2
    height += 1
  }
  return { k, height }
}

/** The height of n when n is a power of two, else undefined. */
const heightOfPowerOfTwo = (n: number): number | undefined => {
  let k = 1
  let height = 0
  while (k < n) {
    k *= 2
    height += 1
  }
  return k === n ? height : undefined
}

/** MTH(D[start:end]) for a range the RFC's recursion reaches: start is aligned to the range's left split. */
const rangeHash = (subtree: SubtreeHash, start: number, end: number): Hash => {
  const n = end - start
  const height = heightOfPowerOfTwo(n)
  if (height !== undefined && start % n === 0) return subtree(height, start / n)
  const { k, height: left } = splitOf(n)
  if (start % k !== 0) throw new RangeError(`range [${start}, ${end}) is not a Merkle subtree range`)
  return nodeHash(subtree(left, start / k), rangeHash(subtree, start + k, end))
}

/** The tree hash of the first `size` leaves. */
export const rootOf = (size: number, subtree: SubtreeHash): Hash => {
  if (!isSize(size)) throw new RangeError(`tree size ${size} is not a non-negative safe integer`)
  return size === 0 ? emptyTreeHash : rangeHash(subtree, 0, size)
}

/**
 * Complete subtree hashes over leaf hashes held in memory: every level is built once (2n hashes),
 * then any complete subtree, root or proof of any size up to n is a lookup.
 */
export const subtreeHashesOf = (leaves: ReadonlyArray<Hash>): SubtreeHash => {
  const levels: Array<ReadonlyArray<Hash>> = [leaves]
  for (let below = leaves; below.length >= 2;) {
    const level: Array<Hash> = []
    for (let i = 0; i + 1 < below.length; i += 2) level.push(nodeHash(below[i]!, below[i + 1]!))
    levels.push(level)
    below = level
  }
  return (height, index) => {
    const hash = levels[height]?.[index]
    if (hash === undefined) throw new RangeError(`no complete subtree of height ${height} at index ${index} in ${leaves.length} leaves`)
    return hash
  }
}

/** MTH of a list of leaf hashes. */
export const treeHash = (leaves: ReadonlyArray<Hash>): Hash => rootOf(leaves.length, subtreeHashesOf(leaves))

/** PATH(index, D[0:size]) of RFC 9162 §2.1.3.1: the sibling hashes from the leaf up to the root. */
export const inclusionPath = (index: number, size: number, subtree: SubtreeHash): Array<Hash> => {
  if (!isSize(index) || !isSize(size) || index >= size) {
    throw new RangeError(`no inclusion proof for index ${index} in a tree of size ${size}`)
  }
  const path: Array<Hash> = []
  const walk = (m: number, start: number, n: number): void => {
    if (n === 1) return
    const { k, height } = splitOf(n)
    if (m < k) {
      walk(m, start, k)
      path.push(rangeHash(subtree, start + k, start + n))
    } else {
      walk(m - k, start + k, n - k)
      path.push(subtree(height, start / k))
    }
  }
  walk(index, 0, size)
  return path
}

/** PROOF(first, D[0:second]) of RFC 9162 §2.1.4.1; empty when first is 0 or first = second. */
export const consistencyPath = (first: number, second: number, subtree: SubtreeHash): Array<Hash> => {
  if (!isSize(first) || !isSize(second) || first > second) {
    throw new RangeError(`no consistency proof from size ${first} to size ${second}`)
  }
  const path: Array<Hash> = []
  if (first === 0 || first === second) return path
  const walk = (m: number, start: number, n: number, whole: boolean): void => {
    if (m === n) {
      if (!whole) path.push(rangeHash(subtree, start, start + n))
      return
    }
    const { k, height } = splitOf(n)
    if (m <= k) {
      walk(m, start, k, whole)
      path.push(rangeHash(subtree, start + k, start + n))
    } else {
      walk(m - k, start + k, n - k, false)
      path.push(subtree(height, start / k))
    }
  }
  walk(first, 0, second, true)
  return path
}

const half = (n: number) => Math.floor(n / 2)
const isOdd = (n: number) => n % 2 === 1

/** RFC 9162 §2.1.3.2: does `path` prove `leaf` at `index` in the tree of `size` leaves with `root`? (src/verify/Merkle.ts's, as the page checks it.) */
export const verifyInclusion = (proof: {
  readonly index: number
  readonly size: number
  readonly leaf: Hash
  readonly path: ReadonlyArray<Hash>
  readonly root: Hash
}): boolean => verifySync(verifyInclusionWith(proof))

/**
 * RFC 9162 §2.1.4.2: is the tree of `second` leaves with `secondRoot` an append-only extension of
 * the tree of `first` leaves with `firstRoot`? Equal sizes need equal roots and an empty path; the
 * empty tree (whose root is SHA-256 of nothing) is a prefix of every tree.
 */
export const verifyConsistency = (proof: {
  readonly first: number
  readonly second: number
  readonly firstRoot: Hash
  readonly secondRoot: Hash
  readonly path: ReadonlyArray<Hash>
}): boolean => {
  const { first, second, firstRoot, secondRoot, path } = proof
  if (!isSize(first) || !isSize(second) || first > second) return false
  if (!isHash(firstRoot) || !isHash(secondRoot) || !Array.isArray(path) || !path.every(isHash)) return false
  if (first === 0) {
    return path.length === 0 && hashEquals(firstRoot, emptyTreeHash) && (second > 0 || hashEquals(secondRoot, emptyTreeHash))
  }
  if (first === second) return path.length === 0 && hashEquals(firstRoot, secondRoot)
  if (path.length === 0) return false
  const nodes = heightOfPowerOfTwo(first) === undefined ? path : [firstRoot, ...path]
  let fn = first - 1
  let sn = second - 1
  while (isOdd(fn)) {
    fn = half(fn)
    sn = half(sn)
  }
  let fr = nodes[0]!
  let sr = nodes[0]!
  for (const c of nodes.slice(1)) {
    if (sn === 0) return false
    if (isOdd(fn) || fn === sn) {
      fr = nodeHash(c, fr)
      sr = nodeHash(c, sr)
      while (!isOdd(fn) && fn !== 0) {
        fn = half(fn)
        sn = half(sn)
      }
    } else {
      sr = nodeHash(sr, c)
    }
    fn = half(fn)
    sn = half(sn)
  }
  return sn === 0 && hashEquals(fr, firstRoot) && hashEquals(sr, secondRoot)
}

/** The inclusion proof as the API serves it (hashes as lowercase hex). */
export interface InclusionProof {
  readonly index: number
  readonly tree_size: number
  readonly leaf_hash: string
  readonly inclusion_path: ReadonlyArray<string>
}

/** The consistency proof as the API serves it (hashes as lowercase hex). */
export interface ConsistencyProof {
  readonly first: number
  readonly second: number
  readonly consistency_path: ReadonlyArray<string>
}

export const inclusionProof = (index: number, size: number, subtree: SubtreeHash): InclusionProof => ({
  index,
  tree_size: size,
  leaf_hash: hexOf(subtree(0, index)),
  inclusion_path: inclusionPath(index, size, subtree).map(hexOf)
})

export const consistencyProof = (first: number, second: number, subtree: SubtreeHash): ConsistencyProof => ({
  first,
  second,
  consistency_path: consistencyPath(first, second, subtree).map(hexOf)
})

/** Hex hashes from the wire; undefined when the value is not an array of 64-hex strings. */
export const hashesFromHex = (value: unknown): Array<Hash> | undefined => {
  if (!Array.isArray(value)) return undefined
  const hashes: Array<Hash> = []
  for (const item of value) {
    const hash = hashFromHex(item)
    if (hash === undefined) return undefined
    hashes.push(hash)
  }
  return hashes
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** An inclusion proof in its JSON form against a root: false for any malformed member. */
export const verifyInclusionProof = (proof: unknown, root: Hash): boolean => {
  if (!isRecord(proof)) return false
  const leaf = hashFromHex(proof.leaf_hash)
  const path = hashesFromHex(proof.inclusion_path)
  if (leaf === undefined || path === undefined) return false
  return verifyInclusion({ index: proof.index as number, size: proof.tree_size as number, leaf, path, root })
}

/** A consistency proof in its JSON form between two roots: false for any malformed member. */
export const verifyConsistencyProof = (proof: unknown, firstRoot: Hash, secondRoot: Hash): boolean => {
  if (!isRecord(proof)) return false
  const path = hashesFromHex(proof.consistency_path)
  if (path === undefined) return false
  return verifyConsistency({ first: proof.first as number, second: proof.second as number, firstRoot, secondRoot, path })
}
