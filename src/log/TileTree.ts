import { HashSize, nodeHash, type Hash, type SubtreeHash } from "./Merkle.js"
import { TileHeight, tileHolding, TileWidth, type Tile } from "./Tiles.js"

/**
 * Proof generation over tiles at request rates. A tile of level L holds complete subtrees of height
 * 8·L; every complete subtree of height 8·L + r (r < 8) is a node r levels above them inside one
 * tile. Building a tile's inner tree once (at most 255 hashes) makes each of those a lookup, and a
 * full tile's tree never changes, so it can be kept. The answers are those of
 * `subtreeHashesFromTiles` (Tiles.ts), which recomputes every node each time it is asked.
 */

/** `levels[r]`: the complete nodes r levels above the tile's hashes, concatenated (32 bytes each). */
export interface TileTree {
  readonly tile: Tile
  readonly levels: ReadonlyArray<Uint8Array>
}

export const tileTreeOf = (tile: Tile, data: Uint8Array): TileTree => {
  if (data.length !== tile.width * HashSize) throw new RangeError(`tile ${tile.level}/${tile.index} has ${data.length} bytes, not ${tile.width * HashSize}`)
  const levels: Array<Uint8Array> = [data]
  for (let below = data; below.length >= 2 * HashSize;) {
    const count = Math.floor(below.length / (2 * HashSize))
    const level = new Uint8Array(count * HashSize)
    for (let i = 0; i < count; i++) {
      const left = below.subarray(2 * i * HashSize, (2 * i + 1) * HashSize)
      const right = below.subarray((2 * i + 1) * HashSize, (2 * i + 2) * HashSize)
      level.set(nodeHash(left, right), i * HashSize)
    }
    levels.push(level)
    below = level
  }
  return { tile, levels }
}

/** The tile a complete subtree of a tree of `size` leaves lies in, and its node within that tile's tree. */
const locate = (size: number, height: number, index: number) => {
  const level = Math.floor(height / TileHeight)
  const above = height - level * TileHeight
  const span = 2 ** above
  const first = index * span
  const tile = tileHolding(size, level, first + span - 1)
  return { tile, above, node: (first - tile.index * TileWidth) / span }
}

/** Complete subtree hashes of the tree of `size` leaves, looked up in tile trees (`treeOf` gives the tree of a tile the tree has). */
export const subtreeHashesFromTileTrees = (size: number, treeOf: (tile: Tile) => TileTree | undefined): SubtreeHash =>
  (height, index) => {
    const { tile, above, node } = locate(size, height, index)
    const tree = treeOf(tile)
    const level = tree?.tile.width === tile.width ? tree.levels[above] : undefined
    if (level === undefined || (node + 1) * HashSize > level.length) {
      throw new RangeError(`no tile tree holds the subtree of height ${height} at ${index} in a tree of size ${size}`)
    }
    return level.subarray(node * HashSize, (node + 1) * HashSize) as Hash
  }

const placeholder: Hash = new Uint8Array(HashSize)

/**
 * The tiles a computation over the tree of `size` leaves reads, learnt by running it on placeholder
 * hashes: which subtrees a proof asks for depends only on sizes and indexes, never on hash values.
 */
export const tilesRead = (size: number, uses: (subtree: SubtreeHash) => void): Array<Tile> => {
  const tiles = new Map<string, Tile>()
  uses((height, index) => {
    const { tile } = locate(size, height, index)
    tiles.set(`${tile.level}/${tile.index}`, tile)
    return placeholder
  })
  return [...tiles.values()]
}
