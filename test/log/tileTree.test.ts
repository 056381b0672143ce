import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { consistencyPath, inclusionPath, subtreeHashesOf } from "../../src/log/Merkle.js"
import { tileHashes, tilePath, type Tile } from "../../src/log/Tiles.js"
import { subtreeHashesFromTileTrees, tilesRead, tileTreeOf } from "../../src/log/TileTree.js"
import { hex, refPath, refProof, syntheticLeaves } from "./reference.js"

const leaves = syntheticLeaves(70_000, "tile-tree")
const subtree = subtreeHashesOf(leaves)

/** Proofs over the tile trees of exactly the tiles `tilesRead` names: nothing else is available. */
const fromPlannedTiles = (size: number, uses: (s: ReturnType<typeof subtreeHashesOf>) => void) => {
  const planned = tilesRead(size, uses)
  const trees = new Map(planned.map((tile: Tile) => [tilePath(tile), tileTreeOf(tile, tileHashes(tile, subtree))]))
  return { planned, subtree: subtreeHashesFromTileTrees(size, (tile) => trees.get(tilePath(tile))) }
}

describe("proofs over tile trees", () => {
  it("names few tiles for a proof (one per level on the path, plus the right edge) and gives RFC 9162 paths", () => {
    const size = 70_000
    const index = 12_345
    const { planned, subtree: fromTiles } = fromPlannedTiles(size, (s) => inclusionPath(index, size, s))
    expect(planned.length).toBeLessThanOrEqual(6)
    expect(inclusionPath(index, size, fromTiles).map(hex)).toEqual(refPath(index, leaves.slice(0, size)).map(hex))
  })

  it("property: inclusion and consistency paths equal the reference for any sizes and indexes", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 70_000 }), fc.double({ min: 0, max: 1, noNaN: true }), (size, at) => {
      const index = Math.min(size - 1, Math.floor(at * size))
      const inclusion = fromPlannedTiles(size, (s) => inclusionPath(index, size, s))
      expect(inclusionPath(index, size, inclusion.subtree).map(hex)).toEqual(inclusionPath(index, size, subtree).map(hex))
      const first = Math.max(1, index)
      const consistency = fromPlannedTiles(size, (s) => consistencyPath(first, size, s))
      expect(consistencyPath(first, size, consistency.subtree).map(hex)).toEqual(consistencyPath(first, size, subtree).map(hex))
    }), { numRuns: 200 })
  })

  it("agrees with the reference proofs on a small log", () => {
    const small = leaves.slice(0, 700)
    for (const size of [1, 2, 255, 256, 257, 511, 512, 700]) {
      for (const index of [0, Math.floor(size / 2), size - 1]) {
        const { subtree: fromTiles } = fromPlannedTiles(size, (s) => inclusionPath(index, size, s))
        expect(inclusionPath(index, size, fromTiles).map(hex)).toEqual(refPath(index, small.slice(0, size)).map(hex))
        if (index > 0) {
          const c = fromPlannedTiles(size, (s) => consistencyPath(index, size, s))
          expect(consistencyPath(index, size, c.subtree).map(hex)).toEqual(refProof(index, small.slice(0, size)).map(hex))
        }
      }
    }
  })

  it("refuses a tile tree of the wrong width and bytes of the wrong length", () => {
    const tile = { level: 0, index: 0, width: 10 }
    expect(() => tileTreeOf(tile, new Uint8Array(9 * 32))).toThrow(/not 320/)
    const tree = tileTreeOf({ level: 0, index: 0, width: 9 }, new Uint8Array(9 * 32))
    expect(() => subtreeHashesFromTileTrees(10, () => tree)(0, 3)).toThrow(/no tile tree/)
  })
})
