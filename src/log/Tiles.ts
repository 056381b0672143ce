import { MaxEntrySize } from "../verify/Bundle.js"
import { accept, refuse, type Checked } from "./Checked.js"
import { HashSize, nodeHash, rootOf, type Hash, type SubtreeHash } from "./Merkle.js"

/**
 * C2SP tlog-tiles with height 8: the tree served as static tiles of 256 hashes, and the entries as
 * bundles of 256. A level-L tile holds the hashes of consecutive complete subtrees of 256^L leaves
 * (height 8·L); the rightmost tile of each level is partial (width 1..255) until it fills.
 */
export const TileHeight = 8

export const TileWidth = 256

/** A hash tile: `width` hashes at level 8·`level`, from index `index`·256. */
export interface Tile {
  readonly level: number
  readonly index: number
  /** 256 for a full tile, 1..255 for a partial one. */
  readonly width: number
}

/** An entry bundle: entries `index`·256 .. `index`·256 + width - 1. */
export interface EntryBundle {
  readonly index: number
  readonly width: number
}

/** The spec allows levels 0..63; 256^7 already exceeds every safe-integer tree size. */
export const MaxTileLevel = 63

const isSize = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0

/** How many complete height-8·level subtrees a tree of `size` leaves has: floor(size / 256^level). */
const hashesAtLevel = (size: number, level: number): number => Math.floor(size / TileWidth ** level)

/** The tiles at one level, as the spec counts them: full tiles, then the partial one if any. */
const tilesAtLevel = (count: number, level: number): Array<Tile> => {
  const full = Math.floor(count / TileWidth)
  const tiles: Array<Tile> = []
  for (let index = 0; index < full; index++) tiles.push({ level, index, width: TileWidth })
  if (count % TileWidth !== 0) tiles.push({ level, index: full, width: count % TileWidth })
  return tiles
}

/**
 * Every tile a tree of `size` leaves is served as, level by level (a size-256 tree is one full
 * level-0 tile and a level-1 tile of width 1). A log never serves an empty tile.
 */
export const tilesOf = (size: number): Array<Tile> => {
  if (!isSize(size)) throw new RangeError(`tree size ${size} is not a non-negative safe integer`)
  const tiles: Array<Tile> = []
  for (let level = 0; hashesAtLevel(size, level) > 0; level++) tiles.push(...tilesAtLevel(hashesAtLevel(size, level), level))
  return tiles
}

/** The entry bundles of a tree of `size` leaves: the same indexes and widths as its level-0 tiles. */
export const entryBundlesOf = (size: number): Array<EntryBundle> => {
  if (!isSize(size)) throw new RangeError(`tree size ${size} is not a non-negative safe integer`)
  return tilesAtLevel(size, 0).map(({ index, width }) => ({ index, width }))
}

/** The tile of a tree of `size` leaves that holds hash `hashIndex` of level 8·`level`. */
export const tileHolding = (size: number, level: number, hashIndex: number): Tile => {
  const count = hashesAtLevel(size, level)
  if (!isSize(hashIndex) || hashIndex >= count) {
    throw new RangeError(`a tree of size ${size} has no hash ${hashIndex} at tile level ${level}`)
  }
  const index = Math.floor(hashIndex / TileWidth)
  return { level, index, width: Math.min(TileWidth, count - index * TileWidth) }
}

/** A tile index as path elements: zero-padded groups of three digits, all but the last prefixed `x`. */
export const encodeTileIndex = (index: number): string => {
  if (!isSize(index)) throw new RangeError(`tile index ${index} is not a non-negative safe integer`)
  const groups: Array<string> = []
  let rest = index
  do {
    groups.unshift(String(rest % 1000).padStart(3, "0"))
    rest = Math.floor(rest / 1000)
  } while (rest > 0)
  return groups.map((group, i) => (i < groups.length - 1 ? "x" + group : group)).join("/")
}

const widthSuffix = (width: number): string => {
  if (!Number.isInteger(width) || width < 1 || width > TileWidth) throw new RangeError(`tile width ${width} is not in 1..256`)
  return width === TileWidth ? "" : `.p/${width}`
}

/** `tile/<L>/<N>[.p/<W>]`. */
export const tilePath = (tile: Tile): string => {
  if (!Number.isInteger(tile.level) || tile.level < 0 || tile.level > MaxTileLevel) {
    throw new RangeError(`tile level ${tile.level} is not in 0..${MaxTileLevel}`)
  }
  return `tile/${tile.level}/${encodeTileIndex(tile.index)}${widthSuffix(tile.width)}`
}

/** `tile/entries/<N>[.p/<W>]`. */
export const entryBundlePath = (bundle: EntryBundle): string =>
  `tile/entries/${encodeTileIndex(bundle.index)}${widthSuffix(bundle.width)}`

const LevelPattern = /^(0|[1-9][0-9]?)$/
const WidthPattern = /^[1-9][0-9]{0,2}$/
const InnerGroupPattern = /^x[0-9]{3}$/
const LastGroupPattern = /^[0-9]{3}$/

/**
 * `<N>[.p/<W>]` as path elements, canonical only: three-digit groups, `x` on all but the last, no
 * superfluous leading group (x000/005 is not 5), W in 1..255 without leading zeros.
 */
const parseIndexAndWidth = (elements: ReadonlyArray<string>): { index: number; width: number } | undefined => {
  let groups = elements
  let width = TileWidth
  const last = elements[elements.length - 1]
  const beforeLast = elements[elements.length - 2]
  if (beforeLast !== undefined && beforeLast.endsWith(".p") && last !== undefined) {
    if (!WidthPattern.test(last) || Number(last) >= TileWidth) return undefined
    width = Number(last)
    groups = [...elements.slice(0, -2), beforeLast.slice(0, -2)]
  }
  // Six groups reach 10^18, past every safe integer: more is never an index.
  if (groups.length === 0 || groups.length > 6) return undefined
  if (!groups.every((group, i) => (i < groups.length - 1 ? InnerGroupPattern : LastGroupPattern).test(group))) return undefined
  const index = Number(groups.map((group) => group.replace("x", "")).join(""))
  if (!Number.isSafeInteger(index) || encodeTileIndex(index) !== groups.join("/")) return undefined
  return { index, width }
}

/** The tile a `tile/<L>/<N>[.p/<W>]` path names; undefined for any other or non-canonical path. */
export const parseTilePath = (path: string): Tile | undefined => {
  const [head, level, ...rest] = path.split("/")
  if (head !== "tile" || level === undefined || !LevelPattern.test(level) || Number(level) > MaxTileLevel) return undefined
  const parsed = parseIndexAndWidth(rest)
  return parsed === undefined ? undefined : { level: Number(level), ...parsed }
}

/** The bundle a `tile/entries/<N>[.p/<W>]` path names; undefined for any other or non-canonical path. */
export const parseEntryBundlePath = (path: string): EntryBundle | undefined => {
  const [head, entries, ...rest] = path.split("/")
  if (head !== "tile" || entries !== "entries") return undefined
  return parseIndexAndWidth(rest)
}

/** A tile's bytes: its `width` hashes, concatenated. */
export const tileHashes = (tile: Tile, subtree: SubtreeHash): Uint8Array => {
  const data = new Uint8Array(tile.width * HashSize)
  const first = tile.index * TileWidth
  for (let i = 0; i < tile.width; i++) data.set(subtree(TileHeight * tile.level, first + i), i * HashSize)
  return data
}

/** Entries are at most 65535 bytes: each is preceded by its length as a big-endian uint16 (a relying party checks the same bound). */
export { MaxEntrySize }

export const encodeEntryBundle = (entries: ReadonlyArray<Uint8Array>): Uint8Array => {
  const total = entries.reduce((sum, entry) => sum + 2 + entry.length, 0)
  const bundle = new Uint8Array(total)
  let at = 0
  for (const entry of entries) {
    if (entry.length > MaxEntrySize) throw new RangeError(`an entry of ${entry.length} bytes does not fit a bundle (max ${MaxEntrySize})`)
    bundle[at] = entry.length >>> 8
    bundle[at + 1] = entry.length & 0xff
    bundle.set(entry, at + 2)
    at += 2 + entry.length
  }
  return bundle
}

/** The entries of a bundle; refused when a length runs past the end or the count is not `width`. */
export const decodeEntryBundle = (bundle: Uint8Array, width?: number): Checked<Array<Uint8Array>> => {
  const entries: Array<Uint8Array> = []
  let at = 0
  while (at < bundle.length) {
    if (at + 2 > bundle.length) return refuse(`a length prefix is cut off at byte ${at}`)
    const length = (bundle[at]! << 8) | bundle[at + 1]!
    if (at + 2 + length > bundle.length) return refuse(`entry ${entries.length} claims ${length} bytes but the bundle ends first`)
    entries.push(bundle.subarray(at + 2, at + 2 + length))
    at += 2 + length
  }
  if (width !== undefined && entries.length !== width) return refuse(`the bundle holds ${entries.length} entries, not ${width}`)
  return accept(entries)
}

/** The tile bytes the log serves at a tile, or undefined when it has none. */
export type TileReader = (tile: Tile) => Uint8Array | undefined

/**
 * Complete subtree hashes read from the tiles of a tree of `size` leaves: a subtree of height
 * 8·L + r is the fold of 2^r consecutive hashes of one level-L tile. Each tile is read once;
 * a missing tile or one of the wrong length throws.
 */
export const subtreeHashesFromTiles = (size: number, readTile: TileReader): SubtreeHash => {
  const read = new Map<string, Uint8Array>()
  const tileData = (tile: Tile): Uint8Array => {
    const path = tilePath(tile)
    const cached = read.get(path)
    if (cached !== undefined) return cached
    const data = readTile(tile)
    if (data === undefined) throw new RangeError(`tile ${path} is missing`)
    if (data.length !== tile.width * HashSize) {
      throw new RangeError(`tile ${path} has ${data.length} bytes, not ${tile.width * HashSize}`)
    }
    read.set(path, data)
    return data
  }
  return (height, index) => {
    const level = Math.floor(height / TileHeight)
    const span = 2 ** (height - level * TileHeight)
    const first = index * span
    const tile = tileHolding(size, level, first + span - 1)
    const data = tileData(tile)
    const offset = first - tile.index * TileWidth
    let hashes: Array<Hash> = []
    for (let i = 0; i < span; i++) hashes.push(data.subarray((offset + i) * HashSize, (offset + i + 1) * HashSize))
    while (hashes.length > 1) {
      const above: Array<Hash> = []
      for (let i = 0; i < hashes.length; i += 2) above.push(nodeHash(hashes[i]!, hashes[i + 1]!))
      hashes = above
    }
    return hashes[0]!
  }
}

/**
 * A monitor's check: the root of a tree of `size` leaves recomputed from the tiles the log serves,
 * to compare with a checkpoint. It reads only the tiles the root needs (the highest level of each
 * complete subtree on the right edge); a missing or short tile is a refusal, not an exception.
 */
export const rootFromTiles = (size: number, readTile: TileReader): Checked<Hash> => {
  if (!isSize(size)) return refuse(`tree size ${String(size)} is not a non-negative safe integer`)
  try {
    return accept(rootOf(size, subtreeHashesFromTiles(size, readTile)))
  } catch (error) {
    return refuse(error instanceof Error ? error.message : String(error))
  }
}
