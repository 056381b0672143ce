import { HashSize, treeHash, type Hash } from "./Merkle.js"
import { rootFromTiles, TileWidth, type Tile } from "./Tiles.js"

/**
 * How the log grows without reading the whole tree: everything an append needs is the right edge,
 * the partial (fewer than 256 hashes) tile of each tile level. Full tiles never change, and the
 * root of any size is a fold of the complete subtrees on the right edge, which all sit in those
 * partial tiles. Pure: the integrator reads the edge tiles, calls `grow`, and stores the result.
 */

/** The partial tile of each level of a tree of `size` leaves: `levels[k]` holds count_k mod 256 hashes. */
export interface TreeEdge {
  readonly size: number
  readonly levels: ReadonlyArray<ReadonlyArray<Hash>>
}

/** A new complete-subtree hash of height 8·level (level ≥ 1), to store for the hash tiles. */
export interface TileHash {
  readonly level: number
  readonly index: number
  readonly hash: Hash
}

export interface Growth {
  readonly edge: TreeEdge
  /** Every complete height-8·k subtree (k ≥ 1) the new leaves completed, lowest level first. */
  readonly tileHashes: ReadonlyArray<TileHash>
  /** The tiles (of any level) the new leaves filled up, with their 256 hashes. */
  readonly completedTiles: ReadonlyArray<WrittenTile>
  readonly root: Hash
}

/** A tile's hashes, concatenated (32 bytes each), as the log serves it. */
export interface WrittenTile {
  readonly tile: Tile
  readonly data: Uint8Array
}

/** How many hashes tile level `level` holds in a tree of `size` leaves. */
const countAt = (size: number, level: number): number => Math.floor(size / TileWidth ** level)

/** The partial tiles a tree of `size` leaves has, lowest level first (levels whose tiles are all full have none). */
export const edgeTilesOf = (size: number): Array<Tile> => {
  const tiles: Array<Tile> = []
  for (let level = 0; countAt(size, level) > 0; level++) {
    const count = countAt(size, level)
    if (count % TileWidth !== 0) tiles.push({ level, index: Math.floor(count / TileWidth), width: count % TileWidth })
  }
  return tiles
}

const splitTile = (data: Uint8Array): Array<Hash> => {
  const hashes: Array<Hash> = []
  for (let at = 0; at < data.length; at += HashSize) hashes.push(data.subarray(at, at + HashSize))
  return hashes
}

/** The edge of a tree of `size` leaves from the bytes of its partial tiles (as `edgeTilesOf` lists them). */
export const edgeFromTiles = (size: number, read: (tile: Tile) => Uint8Array | undefined): TreeEdge => {
  const levels: Array<ReadonlyArray<Hash>> = []
  for (let level = 0; countAt(size, level) > 0; level++) levels.push([])
  for (const tile of edgeTilesOf(size)) {
    const data = read(tile)
    if (data === undefined || data.length !== tile.width * HashSize) {
      throw new RangeError(`edge tile ${tile.level}/${tile.index} of a tree of size ${size} is missing or not ${tile.width} hashes`)
    }
    levels[tile.level] = splitTile(data)
  }
  return { size, levels }
}

const concat = (hashes: ReadonlyArray<Hash>): Uint8Array => {
  const data = new Uint8Array(hashes.length * HashSize)
  hashes.forEach((hash, i) => data.set(hash, i * HashSize))
  return data
}

/** The root of the tree the edge belongs to: only the partial tiles are read. */
export const rootOfEdge = (edge: TreeEdge): Hash => {
  const root = rootFromTiles(edge.size, (tile) => {
    const hashes = edge.levels[tile.level]
    return hashes !== undefined && hashes.length === tile.width && tile.index === Math.floor(countAt(edge.size, tile.level) / TileWidth)
      ? concat(hashes)
      : undefined
  })
  if (!root.ok) throw new RangeError(`the edge of a tree of size ${edge.size} is inconsistent: ${root.detail}`)
  return root.value
}

/**
 * Appends leaf hashes: each 256 consecutive hashes of a level that complete a tile fold into one
 * hash of the level above (a complete subtree of height 8 more). Cost: the new leaves plus what they
 * complete, never the rest of the tree.
 */
export const grow = (edge: TreeEdge, leaves: ReadonlyArray<Hash>): Growth => {
  const size = edge.size + leaves.length
  const levels: Array<ReadonlyArray<Hash>> = []
  const tileHashes: Array<TileHash> = []
  const completedTiles: Array<WrittenTile> = []
  let carry: ReadonlyArray<Hash> = leaves
  for (let level = 0; countAt(size, level) > 0; level++) {
    const partial = edge.levels[level] ?? []
    const all = carry.length === 0 ? partial : [...partial, ...carry]
    // Index (at this level) of the first hash of `all`: the start of the old partial tile.
    const first = countAt(edge.size, level) - partial.length
    const full = Math.floor(all.length / TileWidth)
    const above: Array<Hash> = []
    for (let t = 0; t < full; t++) {
      const hashes = all.slice(t * TileWidth, (t + 1) * TileWidth)
      const hash = treeHash(hashes)
      above.push(hash)
      tileHashes.push({ level: level + 1, index: first / TileWidth + t, hash })
      completedTiles.push({ tile: { level, index: first / TileWidth + t, width: TileWidth }, data: concat(hashes) })
    }
    levels.push(full === 0 ? all : all.slice(full * TileWidth))
    carry = above
    if (levels[level]!.length !== countAt(size, level) % TileWidth) {
      throw new RangeError(`level ${level} of the grown tree holds ${levels[level]!.length} edge hashes, not ${countAt(size, level) % TileWidth}`)
    }
  }
  const grown = { size, levels }
  return { edge: grown, tileHashes, completedTiles, root: rootOfEdge(grown) }
}

/**
 * Every tile a round changed, as the log serves it after the round: the tiles it filled up and the
 * new partial tiles of the right edge. The integrator hands them to the readers of its instance, so a
 * proof against the new checkpoint (a witness's consistency proof) reads none of them back.
 */
export const tilesWritten = (growth: Growth): Array<WrittenTile> => [
  ...growth.completedTiles,
  ...edgeTilesOf(growth.edge.size).map((tile) => ({ tile, data: concat(growth.edge.levels[tile.level]!) }))
]
