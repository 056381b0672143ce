import { createHash } from "node:crypto"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  consistencyPath,
  consistencyProof,
  emptyTreeHash,
  hashesFromHex,
  inclusionPath,
  inclusionProof,
  leafHash,
  nodeHash,
  rootOf,
  subtreeHashesOf,
  treeHash,
  verifyConsistency,
  verifyConsistencyProof,
  verifyInclusion,
  verifyInclusionProof,
  type Hash
} from "../../src/log/Merkle.js"
import { flipBit, hex, refLeaf, refMth, refNode, refPath, refProof, syntheticLeaves } from "./reference.js"

/** RFC 6962's reference leaves (certificate-transparency merkle_tree_test.cc). */
const ctInputs = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]
const ctLeaves = ctInputs.map((input) => leafHash(Buffer.from(input, "hex")))
/** The published roots of the first 1..8 leaves (kSHA256Roots). */
const ctRoots = [
  "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
  "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
  "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
  "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
  "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
  "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
  "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
  "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"
]
/** Published inclusion paths (kSHA256Paths; the C++ test counts leaves from 1, these are 0-based). */
const ctPaths: ReadonlyArray<{ index: number; size: number; path: ReadonlyArray<string> }> = [
  { index: 0, size: 1, path: [] },
  {
    index: 0,
    size: 8,
    path: [
      "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"
    ]
  },
  {
    index: 5,
    size: 8,
    path: [
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"
    ]
  },
  { index: 2, size: 3, path: ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"] },
  {
    index: 1,
    size: 5,
    path: [
      "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"
    ]
  }
]
/** Published consistency proofs (kSHA256Proofs). */
const ctProofs: ReadonlyArray<{ first: number; second: number; path: ReadonlyArray<string> }> = [
  { first: 1, second: 1, path: [] },
  {
    first: 1,
    second: 8,
    path: [
      "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"
    ]
  },
  {
    first: 6,
    second: 8,
    path: [
      "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"
    ]
  },
  {
    first: 2,
    second: 5,
    path: [
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"
    ]
  }
]

const ctTree = subtreeHashesOf(ctLeaves)
const fromHex = (list: ReadonlyArray<string>): Array<Hash> => hashesFromHex(list)!
const root = (size: number) => Buffer.from(ctRoots[size - 1]!, "hex")

describe("hashing (RFC 9162 §2.1)", () => {
  it("leaf = SHA-256(0x00 ‖ d), node = SHA-256(0x01 ‖ l ‖ r), empty tree = SHA-256 of nothing", () => {
    const d = Buffer.from("abc")
    expect(hex(leafHash(d))).toBe(createHash("sha256").update(Buffer.concat([Buffer.of(0), d])).digest("hex"))
    const [l, r] = [leafHash(Buffer.of(1)), leafHash(Buffer.of(2))]
    expect(hex(nodeHash(l, r))).toBe(createHash("sha256").update(Buffer.concat([Buffer.of(1), l, r])).digest("hex"))
    expect(hex(emptyTreeHash)).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    expect(hex(treeHash([]))).toBe(hex(emptyTreeHash))
  })

  it("the RFC 6962 reference leaves give the published roots for every prefix", () => {
    for (let size = 1; size <= 8; size++) {
      expect(hex(treeHash(ctLeaves.slice(0, size)))).toBe(ctRoots[size - 1])
      expect(hex(rootOf(size, ctTree))).toBe(ctRoots[size - 1])
    }
    expect(hex(treeHash(ctLeaves))).toBe("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")
  })
})

describe("inclusion proofs (RFC 9162 §2.1.3)", () => {
  it("generates the published paths, and each verifies", () => {
    for (const { index, size, path } of ctPaths) {
      expect(inclusionPath(index, size, ctTree).map(hex)).toEqual(path)
      expect(verifyInclusion({ index, size, leaf: ctLeaves[index]!, path: fromHex(path), root: root(size) })).toBe(true)
    }
  })

  it("rejects every mangling the CT verifier tests reject", () => {
    for (const { index, size, path: published } of ctPaths.filter((p) => p.size > 1)) {
      const path = fromHex(published)
      const leaf = ctLeaves[index]!
      const ok = (changes: Partial<{ index: number; size: number; leaf: Hash; path: ReadonlyArray<Hash>; root: Hash }>) =>
        verifyInclusion({ index, size, leaf, path, root: root(size), ...changes })
      expect(ok({})).toBe(true)
      for (const wrong of [index - 1, index + 1, index ^ 2]) expect(ok({ index: wrong })).toBe(false)
      for (const wrong of [size * 2, Math.floor(size / 2)]) expect(ok({ size: wrong })).toBe(false)
      expect(ok({ leaf: leafHash(Buffer.from("WrongLeaf")) })).toBe(false)
      expect(ok({ root: emptyTreeHash })).toBe(false)
      for (let j = 0; j < path.length; j++) expect(ok({ path: path.map((h, i) => (i === j ? emptyTreeHash : h)) })).toBe(false)
      expect(ok({ path: [...path, root(size)] })).toBe(false)
      expect(ok({ path: [...path, emptyTreeHash] })).toBe(false)
      expect(ok({ path: path.slice(0, -1) })).toBe(false)
      expect(ok({ path: [emptyTreeHash, ...path] })).toBe(false)
      expect(ok({ path: [root(size), ...path] })).toBe(false)
    }
  })

  it("rejects impossible positions and malformed hashes instead of throwing", () => {
    const leaf = ctLeaves[0]!
    const cases: Array<[number, number]> = [[0, 0], [1, 0], [2, 1], [1, 1], [-1, 4], [0.5, 4], [0, Number.MAX_SAFE_INTEGER + 2], [NaN, 4]]
    for (const [index, size] of cases) expect(verifyInclusion({ index, size, leaf, path: [], root: leaf })).toBe(false)
    expect(verifyInclusion({ index: 0, size: 1, leaf, path: [], root: leaf })).toBe(true)
    expect(verifyInclusion({ index: 0, size: 1, leaf: leaf.subarray(1), path: [], root: leaf.subarray(1) })).toBe(false)
    expect(verifyInclusion({ index: 0, size: 2, leaf, path: [Buffer.alloc(31)], root: leaf })).toBe(false)
    expect(verifyInclusion({ index: 0, size: 2, leaf, path: "nope" as never, root: leaf })).toBe(false)
  })

  it("generation refuses an index outside the tree", () => {
    expect(() => inclusionPath(8, 8, ctTree)).toThrow(RangeError)
    expect(() => inclusionPath(-1, 8, ctTree)).toThrow(RangeError)
    expect(() => inclusionPath(0, 9, ctTree)).toThrow(RangeError)
  })

  it("the JSON form carries hex hashes and verifies; a malformed member fails", () => {
    const proof = inclusionProof(5, 8, ctTree)
    expect(proof).toEqual({ index: 5, tree_size: 8, leaf_hash: hex(ctLeaves[5]!), inclusion_path: ctPaths[2]!.path })
    expect(verifyInclusionProof(proof, root(8))).toBe(true)
    expect(verifyInclusionProof({ ...proof, leaf_hash: proof.leaf_hash.toUpperCase() }, root(8))).toBe(false)
    expect(verifyInclusionProof({ ...proof, inclusion_path: [...proof.inclusion_path, "00"] }, root(8))).toBe(false)
    expect(verifyInclusionProof({ ...proof, tree_size: "8" }, root(8))).toBe(false)
    expect(verifyInclusionProof(null, root(8))).toBe(false)
  })
})

describe("consistency proofs (RFC 9162 §2.1.4)", () => {
  it("generates the published proofs, and each verifies", () => {
    for (const { first, second, path } of ctProofs) {
      expect(consistencyPath(first, second, ctTree).map(hex)).toEqual(path)
      expect(verifyConsistency({ first, second, firstRoot: root(first), secondRoot: root(second), path: fromHex(path) })).toBe(true)
    }
  })

  it("rejects every mangling the CT verifier tests reject", () => {
    for (const { first, second, path: published } of ctProofs.filter((p) => p.path.length > 0)) {
      const path = fromHex(published)
      const ok = (changes: Partial<{ first: number; second: number; firstRoot: Hash; secondRoot: Hash; path: ReadonlyArray<Hash> }>) =>
        verifyConsistency({ first, second, firstRoot: root(first), secondRoot: root(second), path, ...changes })
      expect(ok({})).toBe(true)
      for (const wrong of [first - 1, first + 1, first ^ 2]) expect(ok({ first: wrong })).toBe(false)
      for (const wrong of [second * 2, Math.floor(second / 2)]) expect(ok({ second: wrong })).toBe(false)
      const wrongRoot = leafHash(Buffer.from("WrongRoot"))
      expect(ok({ firstRoot: wrongRoot })).toBe(false)
      expect(ok({ secondRoot: wrongRoot })).toBe(false)
      expect(ok({ firstRoot: root(second), secondRoot: root(first) })).toBe(false)
      expect(ok({ path: [] })).toBe(false)
      for (let j = 0; j < path.length; j++) expect(ok({ path: path.map((h, i) => (i === j ? emptyTreeHash : h)) })).toBe(false)
      expect(ok({ path: [...path, emptyTreeHash] })).toBe(false)
      expect(ok({ path: [...path, path[path.length - 1]!] })).toBe(false)
      expect(ok({ path: path.slice(0, -1) })).toBe(false)
      expect(ok({ path: [emptyTreeHash, ...path] })).toBe(false)
      expect(ok({ path: [path[0]!, ...path] })).toBe(false)
    }
  })

  it("edge sizes: equal sizes need equal roots and no path; the empty tree precedes everything; no time travel", () => {
    const check = (first: number, second: number, firstRoot: Hash, secondRoot: Hash, path: ReadonlyArray<Hash> = []) =>
      verifyConsistency({ first, second, firstRoot, secondRoot, path })
    expect(check(0, 0, emptyTreeHash, emptyTreeHash)).toBe(true)
    expect(check(0, 5, emptyTreeHash, root(5))).toBe(true)
    expect(check(0, 5, root(1), root(5))).toBe(false)
    expect(check(0, 5, emptyTreeHash, root(5), [root(5)])).toBe(false)
    expect(check(3, 3, root(3), root(3))).toBe(true)
    expect(check(3, 3, root(3), root(4))).toBe(false)
    expect(check(3, 3, root(3), root(3), [root(3)])).toBe(false)
    expect(check(2, 1, root(2), root(1))).toBe(false)
    expect(check(1, 2, root(1), root(2))).toBe(false)
    expect(check(-1, 2, root(1), root(2))).toBe(false)
    expect(() => consistencyPath(3, 2, ctTree)).toThrow(RangeError)
  })

  it("the JSON form verifies; a malformed member fails", () => {
    const proof = consistencyProof(6, 8, ctTree)
    expect(proof).toEqual({ first: 6, second: 8, consistency_path: ctProofs[2]!.path })
    expect(verifyConsistencyProof(proof, root(6), root(8))).toBe(true)
    expect(verifyConsistencyProof({ ...proof, consistency_path: proof.consistency_path.slice(1) }, root(6), root(8))).toBe(false)
    expect(verifyConsistencyProof({ ...proof, consistency_path: "x" }, root(6), root(8))).toBe(false)
    expect(verifyConsistencyProof({ ...proof, first: 5 }, root(6), root(8))).toBe(false)
  })
})

/** A tree of 1..300 synthetic leaves. */
const tree = fc.record({ size: fc.integer({ min: 1, max: 300 }), salt: fc.string({ maxLength: 6 }) })
  .map(({ size, salt }) => ({ size, leaves: syntheticLeaves(size, salt) }))

describe("proofs over random trees (properties)", () => {
  it("roots and sampled proofs equal the RFC's recursive definitions", () => {
    fc.assert(
      fc.property(tree, fc.nat(), fc.nat(), ({ size, leaves }, i, m) => {
        const subtree = subtreeHashesOf(leaves)
        const index = i % size
        const first = m % (size + 1)
        expect(hex(rootOf(size, subtree))).toBe(hex(refMth(leaves)))
        expect(hex(rootOf(first, subtree))).toBe(hex(refMth(leaves.slice(0, first))))
        expect(inclusionPath(index, size, subtree).map(hex)).toEqual(refPath(index, leaves).map(hex))
        expect(consistencyPath(first, size, subtree).map(hex)).toEqual(refProof(first, leaves).map(hex))
      }),
      { numRuns: 60 }
    )
  })

  it("every inclusion proof of every leaf verifies, and only at its own index", () => {
    fc.assert(
      fc.property(tree, ({ size, leaves }) => {
        const subtree = subtreeHashesOf(leaves)
        const treeRoot = rootOf(size, subtree)
        for (let index = 0; index < size; index++) {
          const path = inclusionPath(index, size, subtree)
          expect(verifyInclusion({ index, size, leaf: leaves[index]!, path, root: treeRoot })).toBe(true)
          expect(verifyInclusion({ index: (index + 1) % size, size, leaf: leaves[index]!, path, root: treeRoot })).toBe(size === 1)
          expect(verifyInclusion({ index: size, size, leaf: leaves[index]!, path, root: treeRoot })).toBe(false)
        }
      }),
      { numRuns: 30 }
    )
  })

  it("every consistency proof of every smaller size verifies", () => {
    fc.assert(
      fc.property(tree, ({ size, leaves }) => {
        const subtree = subtreeHashesOf(leaves)
        const secondRoot = rootOf(size, subtree)
        for (let first = 0; first <= size; first++) {
          const firstRoot = rootOf(first, subtree)
          const path = consistencyPath(first, size, subtree)
          expect(verifyConsistency({ first, second: size, firstRoot, secondRoot, path })).toBe(true)
          if (first > 0 && first < size) {
            expect(verifyConsistency({ first, second: size, firstRoot: secondRoot, secondRoot: firstRoot, path })).toBe(false)
          }
        }
      }),
      { numRuns: 30 }
    )
  })

  it("a flipped bit anywhere, a wrong index or a wrong size makes an inclusion proof fail", () => {
    fc.assert(
      fc.property(tree, fc.nat(), fc.nat(), fc.nat({ max: 255 }), fc.integer({ min: 1, max: 1000 }), ({ size, leaves }, i, j, bit, delta) => {
        const subtree = subtreeHashesOf(leaves)
        const index = i % size
        const proof = { index, size, leaf: leaves[index]!, path: inclusionPath(index, size, subtree), root: rootOf(size, subtree) }
        expect(verifyInclusion(proof)).toBe(true)
        expect(verifyInclusion({ ...proof, leaf: flipBit(proof.leaf, bit) })).toBe(false)
        expect(verifyInclusion({ ...proof, root: flipBit(proof.root, bit) })).toBe(false)
        if (proof.path.length > 0) {
          const at = j % proof.path.length
          expect(verifyInclusion({ ...proof, path: proof.path.map((h, k) => (k === at ? flipBit(h, bit) : h)) })).toBe(false)
          expect(verifyInclusion({ ...proof, path: proof.path.filter((_, k) => k !== at) })).toBe(false)
        }
        expect(verifyInclusion({ ...proof, path: [...proof.path, proof.root] })).toBe(false)
        const otherIndex = (index + 1 + (j % Math.max(1, size - 1))) % size
        if (otherIndex !== index) expect(verifyInclusion({ ...proof, index: otherIndex })).toBe(false)
        // A size whose tree has another shape along this leaf's path cannot take the same path.
        const otherSize = size + delta
        if (inclusionPath(index, otherSize, subtreeHashesOf(syntheticLeaves(otherSize))).length !== proof.path.length) {
          expect(verifyInclusion({ ...proof, size: otherSize })).toBe(false)
        }
        expect(verifyInclusion({ ...proof, size: size * 2 })).toBe(false)
      }),
      { numRuns: 200 }
    )
  })

  it("a flipped bit anywhere, a missing or extra element, or wrong sizes make a consistency proof fail", () => {
    fc.assert(
      fc.property(tree, fc.nat(), fc.nat(), fc.nat({ max: 255 }), ({ size, leaves }, m, j, bit) => {
        fc.pre(size >= 2)
        const subtree = subtreeHashesOf(leaves)
        const first = 1 + (m % (size - 1))
        const proof = { first, second: size, firstRoot: rootOf(first, subtree), secondRoot: rootOf(size, subtree), path: consistencyPath(first, size, subtree) }
        expect(verifyConsistency(proof)).toBe(true)
        expect(verifyConsistency({ ...proof, firstRoot: flipBit(proof.firstRoot, bit) })).toBe(false)
        expect(verifyConsistency({ ...proof, secondRoot: flipBit(proof.secondRoot, bit) })).toBe(false)
        const at = j % proof.path.length
        expect(verifyConsistency({ ...proof, path: proof.path.map((h, k) => (k === at ? flipBit(h, bit) : h)) })).toBe(false)
        expect(verifyConsistency({ ...proof, path: proof.path.filter((_, k) => k !== at) })).toBe(false)
        expect(verifyConsistency({ ...proof, path: [...proof.path, proof.path[at]!] })).toBe(false)
        expect(verifyConsistency({ ...proof, first: first + 1 })).toBe(false)
        expect(verifyConsistency({ ...proof, second: size * 2 })).toBe(false)
        expect(verifyConsistency({ ...proof, first: size, second: first })).toBe(false)
      }),
      { numRuns: 200 }
    )
  })

  it("the in-memory tree agrees with the reference leaf hash and node recipe", () => {
    const data = [Buffer.from("a"), Buffer.from("b"), Buffer.from("c")]
    expect(hex(treeHash(data.map(leafHash)))).toBe(hex(refNode(refNode(refLeaf(data[0]!), refLeaf(data[1]!)), refLeaf(data[2]!))))
  })
})
