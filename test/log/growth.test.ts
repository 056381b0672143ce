import * as fc from "fast-check"
import { afterAll, describe, expect, it } from "vitest"
import { edgeFromTiles, edgeTilesOf, grow, rootOfEdge, tilesWritten, type TileHash, type TreeEdge } from "../../src/log/Growth.js"
import { emptyTreeHash, subtreeHashesOf, type SubtreeHash } from "../../src/log/Merkle.js"
import { tileHashes, tilePath, tilesOf, type Tile } from "../../src/log/Tiles.js"
import { hex, refMthOfSizes, syntheticLeaves } from "./reference.js"

const empty: TreeEdge = { size: 0, levels: [] }

/**
 * A log of 70,000 leaves (past the 65,536 of a level-2 tile), its complete subtrees and its reference roots,
 * made once for the tests that need a log that size: the leaf hashes and the subtrees each cost 70,000 hashes,
 * and three tests made their own. They only read it; a log of fewer leaves is a prefix of it. Dropped after the
 * file (some 40 MB), since the worker goes on to other files.
 */
let big: { readonly leaves: ReadonlyArray<Uint8Array>; readonly subtree: SubtreeHash; readonly root: (size: number) => Buffer } | undefined
const bigLog = () => {
  if (big === undefined) {
    const leaves = syntheticLeaves(70_000)
    big = { leaves, subtree: subtreeHashesOf(leaves), root: refMthOfSizes(leaves) }
  }
  return big
}
afterAll(() => {
  big = undefined
})

/** Grows a log from nothing in the given steps, as the integrator does round by round. */
const growInSteps = (leaves: ReadonlyArray<Uint8Array>, steps: ReadonlyArray<number>) => {
  let edge = empty
  let at = 0
  const stored: Array<TileHash> = []
  const roots: Array<{ size: number; root: string }> = []
  for (const step of steps) {
    const grown = grow(edge, leaves.slice(at, at + step))
    at += step
    edge = grown.edge
    stored.push(...grown.tileHashes)
    roots.push({ size: at, root: hex(grown.root) })
  }
  return { edge, stored, roots }
}

describe("growing the log from its right edge", () => {
  it("the empty tree has no edge tiles and the empty root", () => {
    expect(edgeTilesOf(0)).toEqual([])
    expect(hex(rootOfEdge(empty))).toBe(hex(emptyTreeHash))
  })

  it("names the partial tile of each level: 70,000 leaves → level 0 width 112, level 1 width 17, level 2 width 1", () => {
    expect(edgeTilesOf(70_000)).toEqual([
      { level: 0, index: 273, width: 112 },
      { level: 1, index: 1, width: 17 },
      { level: 2, index: 0, width: 1 }
    ])
    expect(edgeTilesOf(65_536)).toEqual([{ level: 2, index: 0, width: 1 }])
  })

  it("gives the RFC 9162 root after every step, and stores exactly the complete height-8k subtrees", () => {
    const { leaves, subtree, root: refRoot } = bigLog()
    const { stored, roots } = growInSteps(leaves, [1, 254, 1, 1, 300, 5_000, 10_000, 0, 54_443])
    for (const { size, root } of roots) expect(root, `root of ${size}`).toBe(hex(refRoot(size)))
    // Level 1: 273 subtrees of 256 leaves; level 2: 1 subtree of 65,536 leaves.
    expect(stored.filter((h) => h.level === 1).map((h) => h.index)).toEqual([...Array(273).keys()])
    expect(stored.filter((h) => h.level === 2).map((h) => h.index)).toEqual([0])
    expect(stored.filter((h) => h.level > 2)).toEqual([])
    for (const { level, index, hash } of stored) expect(hex(hash)).toBe(hex(subtree(8 * level, index)))
  })

  it("reads its edge back from the partial tiles the log serves and continues identically", () => {
    const { leaves, subtree, root } = bigLog()
    const tiles = new Map(edgeTilesOf(65_900).map((tile) => [tilePath(tile), tileHashes(tile, subtree)]))
    const edge = edgeFromTiles(65_900, (tile: Tile) => tiles.get(tilePath(tile)))
    expect(hex(rootOfEdge(edge))).toBe(hex(root(65_900)))
    expect(hex(grow(edge, leaves.slice(65_900, 66_000)).root)).toBe(hex(root(66_000)))
  })

  it("refuses an edge tile that is missing or of the wrong width", () => {
    expect(() => edgeFromTiles(300, () => undefined)).toThrow(/missing/)
    expect(() => edgeFromTiles(300, () => new Uint8Array(32))).toThrow(/44 hashes/)
  })

  it("property: any split of any log into rounds gives the same roots and tile hashes as building it at once", () => {
    const leaves = syntheticLeaves(3_000, "growth")
    const subtree = subtreeHashesOf(leaves)
    const refRoot = refMthOfSizes(leaves)
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 700 }), { minLength: 1, maxLength: 12 }), (steps) => {
      const total = Math.min(leaves.length, steps.reduce((a, b) => a + b, 0))
      const { stored, roots } = growInSteps(leaves.slice(0, total), steps)
      for (const { size, root } of roots) if (size <= total) expect(root).toBe(hex(refRoot(Math.min(size, total))))
      expect(stored.map((h) => `${h.level}/${h.index}`)).toEqual([...Array(Math.floor(total / 256)).keys()].map((i) => `1/${i}`))
      for (const { level, index, hash } of stored) expect(hex(hash)).toBe(hex(subtree(8 * level, index)))
    }), { numRuns: 60 })
  })

  it("property: the tiles a round (of at least one leaf) hands to the readers are the tiles it created or widened and the edge, with the bytes the log serves after it", () => {
    const { leaves, subtree } = bigLog()
    fc.assert(fc.property(fc.array(fc.integer({ min: 1, max: 20_000 }), { minLength: 1, maxLength: 8 }), (steps) => {
      let edge = empty
      for (const step of steps) {
        const before = new Set(tilesOf(edge.size).map(tilePath))
        const grown = grow(edge, leaves.slice(edge.size, edge.size + step))
        const now = new Set(tilesOf(grown.edge.size).map(tilePath))
        const written = tilesWritten(grown).map(({ tile, data }) => ({ path: tilePath(tile), tile, data }))
        const paths = new Set(written.map((w) => w.path))
        // Every tile the round created or widened, and the edge's partial tiles (some unchanged); nothing else.
        for (const path of now) if (!before.has(path)) expect(paths.has(path), path).toBe(true)
        for (const path of paths) expect(now.has(path), path).toBe(true)
        expect(paths.size).toBe(written.length)
        for (const { path, tile, data } of written) expect(hex(data), path).toBe(hex(tileHashes(tile, subtree)))
        edge = grown.edge
      }
    }), { numRuns: 15 })
  })
})
