import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { inclusionPath, consistencyPath, rootOf, subtreeHashesOf, type SubtreeHash } from "../../src/log/Merkle.js"
import {
  decodeEntryBundle,
  encodeEntryBundle,
  encodeTileIndex,
  entryBundlePath,
  entryBundlesOf,
  parseEntryBundlePath,
  parseTilePath,
  rootFromTiles,
  subtreeHashesFromTiles,
  tileHashes,
  tilePath,
  tilesOf,
  type Tile
} from "../../src/log/Tiles.js"
import { flipBit, hex, refLeaf, refMth, refMthOfSizes, syntheticLeaves } from "./reference.js"

/** The tiles a log of these leaves serves, as a map from path to bytes. */
const serve = (size: number, subtree: SubtreeHash): Map<string, Uint8Array> =>
  new Map(tilesOf(size).map((tile) => [tilePath(tile), tileHashes(tile, subtree)]))

const readerOf = (tiles: Map<string, Uint8Array>) => (tile: Tile) => tiles.get(tilePath(tile))

const summary = (tiles: ReadonlyArray<Tile>) => {
  const counts = new Map<string, number>()
  for (const { level, width } of tiles) {
    const key = `${level}:${width === 256 ? "full" : width}`
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  return Object.fromEntries(counts)
}

describe("tile coordinates (C2SP tlog-tiles, height 8)", () => {
  it("a tree of 70,000: 273 full level-0 tiles, a level-0 tile of width 112, one full and one 17-wide level-1 tile, a 1-wide level-2 tile", () => {
    expect(summary(tilesOf(70_000))).toEqual({ "0:full": 273, "0:112": 1, "1:full": 1, "1:17": 1, "2:1": 1 })
  })

  it("a tree of 256 is one full level-0 tile and a level-1 tile of width 1; an empty tree has no tiles", () => {
    expect(tilesOf(256)).toEqual([{ level: 0, index: 0, width: 256 }, { level: 1, index: 0, width: 1 }])
    expect(tilesOf(255)).toEqual([{ level: 0, index: 0, width: 255 }])
    expect(tilesOf(0)).toEqual([])
    expect(entryBundlesOf(513)).toEqual([{ index: 0, width: 256 }, { index: 1, width: 256 }, { index: 2, width: 1 }])
  })

  it("partial width at level l is floor(size / 256^l) mod 256, after floor(size / 256^(l+1)) full tiles (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3_000_000 }), (size) => {
        const tiles = tilesOf(size)
        for (let level = 0; level < 4; level++) {
          const full = Math.floor(size / 256 ** (level + 1))
          const partial = Math.floor(size / 256 ** level) % 256
          const expected: Array<Tile> = Array.from({ length: full }, (_, index) => ({ level, index, width: 256 }))
          if (partial > 0) expected.push({ level, index: full, width: partial })
          expect(tiles.filter((tile) => tile.level === level)).toEqual(expected)
        }
        expect(tiles.every((tile) => tile.level < 4)).toBe(true)
      }),
      { numRuns: 50, examples: [[65_535], [65_536], [65_537], [16_777_215]] }
    )
  })
})

describe("tile paths", () => {
  it("encodes indexes as the spec's example and as zero-padded groups", () => {
    expect(encodeTileIndex(1_234_067)).toBe("x001/x234/067")
    expect(encodeTileIndex(0)).toBe("000")
    expect(encodeTileIndex(5)).toBe("005")
    expect(encodeTileIndex(1000)).toBe("x001/000")
    expect(encodeTileIndex(999_999)).toBe("x999/999")
    expect(tilePath({ level: 0, index: 1_234_067, width: 256 })).toBe("tile/0/x001/x234/067")
    expect(tilePath({ level: 2, index: 5, width: 17 })).toBe("tile/2/005.p/17")
    expect(entryBundlePath({ index: 1_234_067, width: 3 })).toBe("tile/entries/x001/x234/067.p/3")
    expect(entryBundlePath({ index: 0, width: 256 })).toBe("tile/entries/000")
  })

  it("parses canonical paths", () => {
    expect(parseTilePath("tile/0/x001/x234/067")).toEqual({ level: 0, index: 1_234_067, width: 256 })
    expect(parseTilePath("tile/63/000.p/255")).toEqual({ level: 63, index: 0, width: 255 })
    expect(parseTilePath("tile/1/x003/x057/500.p/1")).toEqual({ level: 1, index: 3_057_500, width: 1 })
    expect(parseEntryBundlePath("tile/entries/x001/000.p/9")).toEqual({ index: 1000, width: 9 })
    expect(parseEntryBundlePath("tile/entries/000")).toEqual({ index: 0, width: 256 })
  })

  it("refuses non-canonical and foreign paths", () => {
    const badTiles = [
      "tile/00/000", "tile/01/000", "tile/64/000", "tile/-1/000", "tile/a/000", "tile//000", "tile/0",
      "tile/0/", "tile/0/0", "tile/0/05", "tile/0/0005", "tile/0/x005", "tile/0/x000/005", "tile/0/001/002",
      "tile/0/x1/002", "tile/0/X001/002", "tile/0/x001/x002", "tile/0/005.p/0", "tile/0/005.p/256",
      "tile/0/005.p/05", "tile/0/005.p/", "tile/0/005.p", "tile/0/005.p/1/", "tile/0/005/", "/tile/0/005",
      "tiles/0/005", "tile/0/005.q/4", "tile/0/x001.p/4/005", "tile/0/+05", "tile/0/ 05", "tile/8/0/001",
      "tile/0/x009/x007/x199/x254/x740/x992/000", "tile/entries/000"
    ]
    for (const path of badTiles) expect([path, parseTilePath(path)]).toEqual([path, undefined])
    const badBundles = ["tile/entries/5", "tile/entries/x000/005", "tile/entries/005.p/0", "tile/entries/005.p/256", "tile/entries", "tile/0/000"]
    for (const path of badBundles) expect([path, parseEntryBundlePath(path)]).toEqual([path, undefined])
  })

  it("every tile round-trips through its path (property)", () => {
    const tile = fc.record({
      level: fc.integer({ min: 0, max: 63 }),
      index: fc.oneof(fc.integer({ min: 0, max: 2000 }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER })),
      width: fc.integer({ min: 1, max: 256 })
    })
    fc.assert(
      fc.property(tile, (t) => {
        const path = tilePath(t)
        expect(path).toMatch(/^tile\/(0|[1-9][0-9]?)\/(x[0-9]{3}\/)*[0-9]{3}(\.p\/[1-9][0-9]{0,2})?$/)
        expect(parseTilePath(path)).toEqual(t)
        expect(parseEntryBundlePath(entryBundlePath(t))).toEqual({ index: t.index, width: t.width })
      }),
      { numRuns: 300 }
    )
  })
})

describe("entry bundles", () => {
  it("prefix each entry with its 2-byte big-endian length", () => {
    const bundle = encodeEntryBundle([Buffer.from("a"), Buffer.alloc(0), Buffer.from("bc"), Buffer.alloc(300, 7)])
    expect(Buffer.from(bundle.subarray(0, 9)).toString("hex")).toBe("000161000000026263")
    expect(Buffer.from(bundle.subarray(9, 11)).toString("hex")).toBe("012c")
    expect(bundle.length).toBe(9 + 2 + 300)
    expect(() => encodeEntryBundle([Buffer.alloc(65_536)])).toThrow(RangeError)
    expect(encodeEntryBundle([Buffer.alloc(65_535)]).length).toBe(65_537)
  })

  it("decode(encode(entries)) = entries; truncated bundles and wrong counts are refused", () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 600 }), { maxLength: 20 }), fc.nat(), (entries, cut) => {
        const bundle = encodeEntryBundle(entries)
        const decoded = decodeEntryBundle(bundle, entries.length)
        expect(decoded.ok && decoded.value.map((e) => Buffer.from(e).toString("hex"))).toEqual(entries.map((e) => Buffer.from(e).toString("hex")))
        expect(decodeEntryBundle(bundle, entries.length + 1).ok).toBe(false)
        if (bundle.length > 0) {
          const truncated = bundle.subarray(0, cut % bundle.length)
          // A cut that lands exactly on an entry boundary is a shorter, well-formed bundle: its count gives it away.
          expect(decodeEntryBundle(truncated, entries.length).ok).toBe(false)
        }
      }),
      { numRuns: 200 }
    )
    expect(decodeEntryBundle(Uint8Array.of(0)).ok).toBe(false)
    expect(decodeEntryBundle(Uint8Array.of(0, 2, 1)).ok).toBe(false)
  })
})

/**
 * Checks every tile of a tree of `size` leaves and the root recomputed from them; `refRoot` is the reference
 * MTH of the leaves at a size (refMthOfSizes for a test that checks one array of leaves at many sizes).
 */
const checkTree = (
  leaves: ReadonlyArray<Uint8Array>,
  size: number,
  subtree = subtreeHashesOf(leaves),
  refRoot: (size: number) => Uint8Array = (n) => refMth(leaves, n)
) => {
  const tiles = serve(size, subtree)
  const expected = hex(refRoot(size))
  const fromTiles = rootFromTiles(size, readerOf(tiles))
  expect(fromTiles.ok && hex(fromTiles.value)).toBe(expected)
  return { subtree, tiles, expected }
}

describe("tile contents and roots from tiles", () => {
  it("a level-0 tile holds leaf hashes; a level-1 hash is the root of a full level-0 tile", () => {
    const leaves = syntheticLeaves(600)
    const subtree = subtreeHashesOf(leaves)
    const level0 = tileHashes({ level: 0, index: 1, width: 256 }, subtree)
    expect(hex(level0)).toBe(leaves.slice(256, 512).map(hex).join(""))
    const level1 = tileHashes({ level: 1, index: 0, width: 2 }, subtree)
    expect(hex(level1)).toBe(hex(refMth(leaves.slice(0, 256))) + hex(refMth(leaves.slice(256, 512))))
    expect(hex(tileHashes({ level: 0, index: 2, width: 88 }, subtree))).toBe(leaves.slice(512, 600).map(hex).join(""))
  })

  it("the root from tiles equals MTH for random sizes up to 2,000 (property)", () => {
    const leaves = syntheticLeaves(2000, "tiles")
    const subtree = subtreeHashesOf(leaves)
    const refRoot = refMthOfSizes(leaves)
    fc.assert(fc.property(fc.integer({ min: 0, max: 2000 }), (size) => void checkTree(leaves, size, subtree, refRoot)), {
      numRuns: 60,
      examples: [[0], [1], [255], [256], [257], [511], [512], [513], [1024]]
    })
  })

  it("across the 65,536 boundary (level-2 tiles)", () => {
    const leaves = syntheticLeaves(65_536 + 256 + 3, "big")
    const subtree = subtreeHashesOf(leaves)
    const refRoot = refMthOfSizes(leaves)
    for (const size of [65_535, 65_536, 65_537, 65_536 + 256 + 3]) {
      const { tiles } = checkTree(leaves, size, subtree, refRoot)
      expect([...tiles.keys()].filter((path) => path.startsWith("tile/2/"))).toEqual(size >= 65_536 ? ["tile/2/000.p/1"] : [])
    }
  })

  it("proofs read from tiles are the proofs from the leaves", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1200 }), fc.nat(), fc.nat(), (size, i, m) => {
        const leaves = syntheticLeaves(size, "proofs")
        const memory = subtreeHashesOf(leaves)
        const fromTiles = subtreeHashesFromTiles(size, readerOf(serve(size, memory)))
        const index = i % size
        const first = m % (size + 1)
        expect(inclusionPath(index, size, fromTiles).map(hex)).toEqual(inclusionPath(index, size, memory).map(hex))
        expect(consistencyPath(first, size, fromTiles).map(hex)).toEqual(consistencyPath(first, size, memory).map(hex))
        expect(hex(rootOf(size, fromTiles))).toBe(hex(refMth(leaves)))
      }),
      { numRuns: 40 }
    )
  })

  it("a changed hash in a tile the root reads changes the root; a missing or short tile is refused", () => {
    const size = 70_000
    const leaves = syntheticLeaves(size, "tamper")
    const { tiles, expected } = checkTree(leaves, size)
    const reads: Array<string> = []
    rootFromTiles(size, (tile) => (reads.push(tilePath(tile)), tiles.get(tilePath(tile))))
    // The right edge of 70,000 = 65,536 + 4,096 + 256 + 64 + 32 + 16: one level-2 hash, 17 level-1 hashes, then level 0.
    expect(reads).toEqual(["tile/2/000.p/1", "tile/1/001.p/17", "tile/0/273.p/112"])
    for (const path of reads) {
      const tampered = new Map(tiles)
      tampered.set(path, flipBit(tiles.get(path)!, 3))
      const result = rootFromTiles(size, readerOf(tampered))
      expect(result.ok && hex(result.value)).not.toBe(expected)
      const missing = new Map(tiles)
      missing.delete(path)
      expect(rootFromTiles(size, readerOf(missing))).toEqual({ ok: false, detail: `tile ${path} is missing` })
      const short = new Map(tiles)
      short.set(path, tiles.get(path)!.subarray(32))
      expect(rootFromTiles(size, readerOf(short)).ok).toBe(false)
    }
    expect(rootFromTiles(-1, readerOf(tiles)).ok).toBe(false)
    expect(rootFromTiles(size, () => { throw new Error("network down") })).toEqual({ ok: false, detail: "network down" })
  })

  it("entry bundles hash to the level-0 tiles", () => {
    const entries = Array.from({ length: 300 }, (_, i) => Buffer.from(`entry ${i}`))
    const leaves = entries.map(refLeaf)
    const subtree = subtreeHashesOf(leaves)
    for (const bundle of entryBundlesOf(300)) {
      const bytes = encodeEntryBundle(entries.slice(bundle.index * 256, bundle.index * 256 + bundle.width))
      const decoded = decodeEntryBundle(bytes, bundle.width)
      expect(decoded.ok).toBe(true)
      const hashed = decoded.ok ? decoded.value.map((entry) => hex(refLeaf(entry))).join("") : ""
      expect(hashed).toBe(hex(tileHashes({ level: 0, ...bundle }, subtree)))
    }
  })
})
