import { Cause, Clock, Context, Deferred, Duration, Effect, FiberSet, Layer, Option } from "effect"
import { MetricsState } from "../observability/Metrics.js"
import { AppConfig } from "../platform/Config.js"
import { FieldError, InvalidProofRequest, NotFound, NotYetLogged } from "../domain/Problem.js"
import type { EventJwk } from "../domain/TrustEvent.js"
import { lru } from "../domain/Memo.js"
import { consistencyProof, HashSize, inclusionPath, inclusionProof, type ConsistencyProof, type InclusionProof, type SubtreeHash } from "./Merkle.js"
import { appendSignatureLines, cosignatureLinesOf, parseCosignerKey, type CosignatureVerifier } from "./Cosignature.js"
import { LogKey } from "./LogKey.js"
import { splitNote } from "./Note.js"
import type { WrittenTile } from "./Growth.js"
import { coseReceiptOf } from "./ReceiptFormats.js"
import { receiptProofBundle, type ReceiptProofBundle, type SignedRelianceReceipt } from "./ReceiptProof.js"
import { LogRepo, type HashRange, type StoredCheckpoint } from "./Repo.js"
import { encodeEntryBundle, parseEntryBundlePath, parseTilePath, TileWidth, type EntryBundle, type Tile } from "./Tiles.js"
import { subtreeHashesFromTileTrees, tilesRead, tileTreeOf, type TileTree } from "./TileTree.js"
import { WitnessRepo, type WitnessedCheckpoint } from "./WitnessRepo.js"

/** A checkpoint read from the database is used for this long before it is read again (another instance may have integrated). */
const CheckpointFreshMs = 200

/**
 * Full tiles never change: this many are kept in memory with their inner trees (16 KiB each), and
 * this many full entry bundles (~36 KiB). Partial tiles are kept per width: requests against the
 * latest checkpoint share them.
 */
const CachedTileTrees = 1_024
const CachedPartialTileTrees = 64
const CachedBundles = 256

/** A receipt waiting for its proof looks again this often when nothing on this instance announced progress. */
const RecheckMs = 500

/** A partial tile is reused this long: a burst of proofs against one checkpoint shares it, and a changed row shows soon. */
const PartialTileFreshMs = 500

/**
 * A read from memory that finds the checkpoint or a partial tile past this share of its freshness starts one read of
 * it in the background, so that under steady reads it is read again before it lapses (and no burst of requests falls
 * through to the database when it does); what is served is never older than its freshness allows.
 */
const AheadShare = 0.75

/** What GET /log/tile/… serves. */
export interface TileBytes {
  readonly bytes: Uint8Array
  /** A full tile (or bundle): immutable, cacheable for ever. */
  readonly full: boolean
}

const tileKey = (level: number, index: number) => `${level}/${index}`

/** A tile's key in the caches: its width too, as a partial tile of another width is another tile. */
const treeKey = (tile: Tile) => `${tile.level}/${tile.index}/${tile.width}`

/** The width the tile (or bundle) at `index` of tile level `level` has in a tree of `size` leaves; 0 when it has none. */
const widthIn = (size: number, level: number, index: number): number => {
  const count = Math.floor(size / TileWidth ** level)
  return Math.max(0, Math.min(TileWidth, count - index * TileWidth))
}

const DecimalPattern = /^(0|[1-9][0-9]{0,15})$/

/** A query parameter that must be a non-negative safe integer in plain decimal. */
const sizeParameter = (name: string, value: string | undefined): Effect.Effect<number, InvalidProofRequest> => {
  if (value !== undefined && DecimalPattern.test(value) && Number.isSafeInteger(Number(value))) return Effect.succeed(Number(value))
  const detail = value === undefined ? "is required" : "must be a non-negative integer in decimal"
  return Effect.fail(new InvalidProofRequest({ detail: `${name} ${detail}.`, errors: [new FieldError({ pointer: `/${name}`, detail })] }))
}

const outsideTree = (pointer: string, detail: string) =>
  new InvalidProofRequest({ detail, errors: [new FieldError({ pointer, detail })] })

/**
 * The methods of `TransparencyLog`. Reads of checkpoints, tiles and proofs serve tlog clients, monitors and
 * receipts' bundles on every request (plain functions, no span); `published` is the integrator's hand-over.
 */
export interface TransparencyLogShape {
  /** The served checkpoint's signed note (with its cosignatures when witnessed). */
  readonly checkpoint: Effect.Effect<string, NotFound>
  /** The newest checkpoint this log signed, at least `atLeast` entries (read again when older). */
  readonly current: (atLeast?: number) => Effect.Effect<Option.Option<StoredCheckpoint>>
  /** The checkpoint served to readers: the newest with a quorum of cosignatures when witnesses are configured. */
  readonly served: (atLeast?: number) => Effect.Effect<Option.Option<StoredCheckpoint>>
  /** The integrator's new checkpoint and the tiles it wrote, for this instance's readers. */
  readonly published: (checkpoint: StoredCheckpoint, written?: ReadonlyArray<WrittenTile>) => Effect.Effect<void>
  /** A tile or entry bundle by its tlog-tiles path. */
  readonly tile: (path: string) => Effect.Effect<TileBytes, NotFound>
  readonly inclusion: (indexParameter: string | undefined, treeSize: string | undefined) => Effect.Effect<InclusionProof, InvalidProofRequest>
  readonly consistency: (firstParameter: string | undefined, secondParameter: string | undefined) => Effect.Effect<ConsistencyProof, InvalidProofRequest>
  /** A receipt with its inclusion proof and the served checkpoint, or NotYetLogged. */
  readonly receiptBundle: (receipt: SignedRelianceReceipt, receiptKey: EventJwk | undefined) => Effect.Effect<ReceiptProofBundle, NotYetLogged>
  /** `receiptBundle` once it exists, waking on this log's progress; none when `ms` pass first. Holds no connection while it waits. */
  readonly receiptBundleWithin: (receipt: SignedRelianceReceipt, receiptKey: EventJwk | undefined, ms: number) => Effect.Effect<Option.Option<ReceiptProofBundle>>
  /** The log moved on this instance (a checkpoint published, a cosignature stored): wakes `receiptBundleWithin`. */
  readonly advanced: Effect.Effect<void>
  readonly fetchTiles: (tiles: ReadonlyArray<Tile>) => Effect.Effect<Map<string, Uint8Array>>
  /** A bundle's facts as an RFC 9942 COSE Receipt, signed by the log key (ReceiptFormats.ts). */
  readonly coseReceipt: (bundle: ReceiptProofBundle) => Uint8Array
  /** The log's origin and C2SP verifier key. */
  readonly key: { readonly origin: string; readonly verifier_key: string }
  /** The same reads answered from this process's memory alone, synchronously (log/FastReads.ts). */
  readonly fromMemory: FromMemory
}

/**
 * The reads `TransparencyLog` answers from memory, without waiting on anything: each gives exactly what the
 * general read would (the same bytes), or undefined when that needs the database or the answer is a
 * refusal; the caller then takes the general read.
 */
export interface FromMemory {
  /** A tile kept in memory: a full tile or bundle (immutable), or a partial tile of the fresh checkpoint's tree. */
  readonly tile: (path: string) => TileBytes | undefined
  /** The served checkpoint's note, while fresh. */
  readonly checkpoint: () => string | undefined
  /** A proof within the tree of the checkpoint in memory, when every tile it reads is in memory. */
  readonly inclusion: (index: number, size: number) => InclusionProof | undefined
  readonly consistency: (first: number, second: number) => ConsistencyProof | undefined
}

const makeTransparencyLog = Effect.gen(function*() {
  const repo = yield* LogRepo
  const key = yield* LogKey
  const config = yield* AppConfig
  const clock = yield* Clock.Clock
  const witnessRepo = yield* WitnessRepo
  const witnessState = (yield* MetricsState).witness
  const witnesses: ReadonlyArray<{ readonly id: string; readonly verifier: CosignatureVerifier }> = config.logWitnesses.flatMap((w) => {
    const parsed = parseCosignerKey(w.verifierKey)
    return parsed.ok ? [{ id: w.verifierKey, verifier: parsed.value }] : []
  })
  const witnessIds = witnesses.map((w) => w.id)
  const quorum = config.logWitnessQuorum
  // The gauges describe this log as this process serves it, from its start.
  if (witnesses.length > 0) Object.assign(witnessState, { witnessedSize: -1, latestSize: -1 })
  const fullTrees = lru<TileTree>(CachedTileTrees)
  const partialTrees = lru<{ readonly tree: TileTree; readonly readAt: number }>(CachedPartialTileTrees)
  const bundles = lru<Uint8Array>(CachedBundles)
  const inScope = yield* FiberSet.makeRuntime<never>()
  /** Runs a read ahead in the background, inside this layer's scope (interrupted when it closes); a failure is logged, not thrown. */
  const readAhead = (what: string, read: Effect.Effect<unknown>, done: () => void) =>
    void inScope(read.pipe(
      Effect.catchCause((cause) => Cause.hasInterruptsOnly(cause) ? Effect.void : Effect.logWarning(`log: reading ${what} ahead failed`, cause)),
      Effect.ensuring(Effect.sync(done))
    ))
  let latest: { readonly checkpoint: StoredCheckpoint; readonly readAt: number } | undefined

  /**
   * Tiles the integrator of this instance just committed (the tiles its round filled up, the new edge's
   * partial tiles), kept as bytes: their tree is built only when a proof reads them (tileTrees).
   */
  const handed = lru<{ readonly data: Uint8Array; readonly readAt: number }>(CachedPartialTileTrees)

  // One Deferred per step of progress, replaced when it completes: every waiter of that step wakes at once.
  let nextStep = Deferred.makeUnsafe<void>()
  const advanced: Effect.Effect<void> = Effect.suspend(() => {
    const step = nextStep
    nextStep = Deferred.makeUnsafe<void>()
    return Deferred.succeed(step, undefined)
  }).pipe(Effect.asVoid)

  /**
   * The integrator on this instance announces each checkpoint it commits, with the tiles its round
   * wrote, so its own readers never lag and a proof against the new checkpoint reads no tile back.
   */
  const published = (checkpoint: StoredCheckpoint, written: ReadonlyArray<WrittenTile> = [], readAt?: number) =>
    Clock.currentTimeMillis.pipe(Effect.map((clockNow) => {
      const now = readAt ?? clockNow
      if (latest === undefined || checkpoint.size >= latest.checkpoint.size) latest = { checkpoint, readAt: now }
      if (witnesses.length > 0) witnessState.latestSize = latest.checkpoint.size
      for (const { tile, data } of written) handed.set(treeKey(tile), { data, readAt: now })
    }), Effect.andThen(advanced))


  // A read is stamped with the instant it began: what it found may have changed since then, so that is the instant
  // its freshness counts from (stamped when it ended, a slow read would extend an old checkpoint's life).
  const refresh = Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeMillis
    const stored = yield* Effect.orDie(repo.latestCheckpoint)
    if (Option.isSome(stored)) yield* published(stored.value, [], startedAt)
    return Option.map(stored, () => latest!.checkpoint)
  })

  /**
   * The read of a stale checkpoint that requests without a lower bound share: when the cached one goes stale under
   * load, every request in flight would read it again (32 reads at once at 32 connections, each waiting its turn for
   * a connection). Uninterruptible, so a client that leaves does not fail the others' read.
   */
  let sharedRefresh: Deferred.Deferred<Option.Option<StoredCheckpoint>> | undefined
  const refreshShared: Effect.Effect<Option.Option<StoredCheckpoint>> = Effect.suspend(() => {
    if (sharedRefresh !== undefined) return Deferred.await(sharedRefresh)
    const shared = Deferred.makeUnsafe<Option.Option<StoredCheckpoint>>()
    sharedRefresh = shared
    return refresh.pipe(
      Effect.onExit((exit) => Effect.andThen(Effect.sync(() => void (sharedRefresh = undefined)), Deferred.done(shared, exit))),
      Effect.uninterruptible
    )
  })

  /** Reads the latest checkpoint ahead (one read at a time) once the one in memory is past AheadShare of its freshness. */
  let latestAhead = false
  const aheadLatest = (now: number) => {
    if (latest === undefined || latestAhead || now - latest.readAt < CheckpointFreshMs * AheadShare) return
    latestAhead = true
    readAhead("the checkpoint", refreshShared, () => void (latestAhead = false))
  }

  /** The latest published checkpoint; `atLeast` re-reads a cached one that is too small for the request. */
  const current = (atLeast = 0): Effect.Effect<Option.Option<StoredCheckpoint>> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      latest !== undefined && now - latest.readAt < CheckpointFreshMs && latest.checkpoint.size >= atLeast
        ? Effect.succeed(Option.some(latest.checkpoint))
        // A request with a lower bound (its own write must be covered) reads for itself: a shared read may have
        // been sent before that write committed.
        : atLeast === 0 ? refreshShared : refresh)

  let witnessed: { readonly checkpoint: StoredCheckpoint; readonly readAt: number } | undefined

  /**
   * The log's note with the witnesses' lines after its own signature, in the configured order. A line
   * that no longer verifies on the stored note (the note was signed again under another origin) is
   * left out; without a quorum of lines left, the checkpoint is not served as witnessed.
   */
  const assemble = (found: WitnessedCheckpoint): StoredCheckpoint | undefined => {
    const split = splitNote(found.note)
    if (!split.ok) return undefined
    const lines = witnesses.flatMap(({ id, verifier }) => {
      const row = found.lines.find((l) => l.witness === id)
      const checked = row === undefined ? undefined : cosignatureLinesOf(`${row.line}\n`, verifier, split.value.text)
      return checked?.ok === true ? checked.value.lines : []
    })
    return lines.length >= quorum ? { size: found.size, root: found.root, note: appendSignatureLines(found.note, lines) } : undefined
  }

  const refreshWitnessed = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const found = yield* Effect.orDie(witnessRepo.newestWitnessed(witnessIds, quorum, witnessed?.checkpoint.size ?? 0))
    const assembled = Option.isSome(found) ? assemble(found.value) : undefined
    if (assembled !== undefined && (witnessed === undefined || assembled.size >= witnessed.checkpoint.size)) witnessed = { checkpoint: assembled, readAt: now }
    else if (witnessed !== undefined) witnessed = { checkpoint: witnessed.checkpoint, readAt: now }
    if (witnessed !== undefined) witnessState.witnessedSize = witnessed.checkpoint.size
    return Option.fromUndefinedOr(witnessed?.checkpoint)
  })

  let witnessedAhead = false
  const aheadWitnessed = (now: number) => {
    if (witnessed === undefined || witnessedAhead || now - witnessed.readAt < CheckpointFreshMs * AheadShare) return
    witnessedAhead = true
    readAhead("the witnessed checkpoint", refreshWitnessed, () => void (witnessedAhead = false))
  }

  /**
   * The checkpoint clients are served (/log/checkpoint, receipt bundles): without witnesses the latest;
   * with them, the newest that a quorum of them cosigned (docs/API.md, "Witnesses").
   */
  const served = (atLeast = 0): Effect.Effect<Option.Option<StoredCheckpoint>> =>
    witnesses.length === 0
      ? current(atLeast)
      : Effect.flatMap(Clock.currentTimeMillis, (now) =>
        witnessed !== undefined && now - witnessed.readAt < CheckpointFreshMs && witnessed.checkpoint.size >= atLeast
          ? Effect.succeed(Option.some(witnessed.checkpoint))
          : refreshWitnessed)

  const sizeNow = (atLeast = 0) => Effect.map(current(atLeast), Option.match({ onNone: () => 0, onSome: (c) => c.size }))

  const checkpoint: Effect.Effect<string, NotFound> = Effect.flatMap(served(), Option.match({
    onNone: () =>
      Effect.fail(new NotFound({
        detail: witnesses.length === 0 ? "The log has not published a checkpoint yet." : "The log has no checkpoint cosigned by a quorum of its witnesses yet."
      })),
    onSome: (c) => Effect.succeed(c.note)
  }))

  /**
   * Reads a partial tile ahead (one read per tile at a time) once the one in memory is past AheadShare of its
   * freshness: from the database, as a read after it lapses would, and kept only if no newer read was kept meanwhile.
   */
  const rereading = new Set<string>()
  const aheadPartial = (tile: Tile, key: string, readAt: number, now: number) => {
    if (now - readAt < PartialTileFreshMs * AheadShare || rereading.has(key)) return
    rereading.add(key)
    readAhead(`tile ${key}`, Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const data = yield* fetchTiles([tile])
      const kept = partialTrees.get(key)
      if (kept === undefined || kept.readAt < startedAt) partialTrees.set(key, { tree: tileTreeOf(tile, data.get(tileKey(tile.level, tile.index))!), readAt: startedAt })
    }), () => void rereading.delete(key))
  }

  /**
   * A tile's tree from memory: built before, or built now from the bytes the integrator handed over. A partial
   * tile's is served while fresh, and read ahead when nearly stale.
   */
  const cachedTree = (tile: Tile, now: number): TileTree | undefined => {
    const key = treeKey(tile)
    const full = tile.width === TileWidth
    const fresh = (readAt: number) => full || now - readAt < PartialTileFreshMs
    const kept = full ? fullTrees.get(key) : partialTrees.get(key)
    if (kept !== undefined && "tile" in kept) return kept
    if (kept !== undefined && fresh(kept.readAt)) {
      aheadPartial(tile, key, kept.readAt, now)
      return kept.tree
    }
    const bytes = handed.get(key)
    if (bytes === undefined || !fresh(bytes.readAt)) return undefined
    const tree = tileTreeOf(tile, bytes.data)
    if (full) fullTrees.set(key, tree)
    else partialTrees.set(key, { tree, readAt: bytes.readAt })
    return tree
  }

  /** The tiles' hashes from the database in one round trip; a tile short of rows is a defect of the store, never served as zeros. */
  const fetchTiles = (tiles: ReadonlyArray<Tile>): Effect.Effect<Map<string, Uint8Array>> =>
    Effect.gen(function*() {
      const ranges: Array<HashRange> = tiles.map((t) => ({ level: t.level, first: t.index * TileWidth, stop: t.index * TileWidth + t.width }))
      const rows = yield* Effect.orDie(repo.readHashes(ranges))
      const data = new Map(tiles.map((t) => [tileKey(t.level, t.index), new Uint8Array(t.width * HashSize)]))
      const filled = new Map<string, number>()
      for (const row of rows) {
        const index = Math.floor(row.index / TileWidth)
        const k = tileKey(row.level, index)
        const bytes = data.get(k)
        if (bytes === undefined || row.hash.length !== HashSize) continue
        bytes.set(row.hash, (row.index - index * TileWidth) * HashSize)
        filled.set(k, (filled.get(k) ?? 0) + 1)
      }
      for (const tile of tiles) {
        const k = tileKey(tile.level, tile.index)
        if (filled.get(k) !== tile.width) return yield* Effect.die(new Error(`tile ${k} has ${filled.get(k) ?? 0} stored hashes, not ${tile.width}`))
      }
      return data
    })

  /** Tile trees for each tile: from memory, else read and built (and kept). */
  const tileTrees = (wanted: ReadonlyArray<Tile>): Effect.Effect<Map<string, TileTree>> =>
    Effect.gen(function*() {
      const trees = new Map<string, TileTree>()
      const missing: Array<Tile> = []
      const now = yield* Clock.currentTimeMillis
      for (const tile of wanted) {
        const cached = cachedTree(tile, now)
        if (cached !== undefined) trees.set(tileKey(tile.level, tile.index), cached)
        else missing.push(tile)
      }
      if (missing.length === 0) return trees
      const data = yield* fetchTiles(missing)
      for (const tile of missing) {
        const tree = tileTreeOf(tile, data.get(tileKey(tile.level, tile.index))!)
        if (tile.width === TileWidth) fullTrees.set(treeKey(tile), tree)
        else partialTrees.set(treeKey(tile), { tree, readAt: now })
        trees.set(tileKey(tile.level, tile.index), tree)
      }
      return trees
    })

  /** Tile bytes (the hashes themselves) for each tile. */
  const readTiles = (wanted: ReadonlyArray<Tile>): Effect.Effect<Map<string, Uint8Array>> =>
    Effect.map(tileTrees(wanted), (trees) => new Map([...trees].map(([k, tree]) => [k, tree.levels[0]!])))

  /** Complete subtree hashes of the tree of `size` leaves, enough for `uses`: the tiles it reads are fetched at once. */
  const subtreeFor = (size: number, uses: (subtree: SubtreeHash) => void): Effect.Effect<SubtreeHash> =>
    Effect.map(tileTrees(tilesRead(size, uses)), (trees) =>
      subtreeHashesFromTileTrees(size, (tile) => trees.get(tileKey(tile.level, tile.index))))

  const hashTile = (tile: Tile) =>
    Effect.map(readTiles([tile]), (data): TileBytes => ({ bytes: data.get(tileKey(tile.level, tile.index))!, full: tile.width === TileWidth }))

  const entryBundle = (bundle: EntryBundle) =>
    Effect.gen(function*() {
      const full = bundle.width === TileWidth
      const cached = full ? bundles.get(String(bundle.index)) : undefined
      if (cached !== undefined) return { bytes: cached, full } satisfies TileBytes
      const entries = yield* Effect.orDie(repo.readEntries(bundle.index * TileWidth, bundle.index * TileWidth + bundle.width))
      if (entries.length !== bundle.width) return yield* Effect.die(new Error(`entry bundle ${bundle.index} has ${entries.length} stored entries, not ${bundle.width}`))
      const bytes = encodeEntryBundle(entries)
      if (full) bundles.set(String(bundle.index), bytes)
      return { bytes, full } satisfies TileBytes
    })

  const noTile = () => new NotFound({ detail: "The log has no such tile." })

  /**
   * `tile/<L>/<N>[.p/<W>]` or `tile/entries/<N>[.p/<W>]` (C2SP tlog-tiles): served only when the
   * published tree has exactly that width there; a malformed path or one beyond the tree is 404.
   */
  const tile = (path: string): Effect.Effect<TileBytes, NotFound> =>
    Effect.gen(function*() {
      const bundle = parseEntryBundlePath(path)
      const hashes = bundle === undefined ? parseTilePath(path) : undefined
      const level = hashes?.level ?? 0
      const named = bundle ?? hashes
      if (named === undefined) return yield* Effect.fail(noTile())
      const needed = named.index * TileWidth ** (level + 1) + named.width * TileWidth ** level
      const exists = (size: number) => widthIn(size, level, named.index) === named.width
      // The served (witnessed) checkpoint may be smaller than the latest: its partial tiles are served too.
      const witnessedSize = witnesses.length === 0 ? -1 : Option.match(yield* served(), { onNone: () => -1, onSome: (c) => c.size })
      if (!exists(yield* sizeNow()) && !exists(yield* sizeNow(needed)) && !(witnessedSize >= 0 && exists(witnessedSize))) {
        return yield* Effect.fail(noTile())
      }
      return yield* (bundle !== undefined ? entryBundle(bundle) : hashTile(hashes!))
    })

  /** The published size a proof may name: a size beyond the cached checkpoint is checked against the database first. */
  const treeSizeParameter = (name: string, value: string | undefined) =>
    Effect.gen(function*() {
      const size = yield* sizeParameter(name, value)
      const publishedSize = yield* sizeNow(size)
      if (size > publishedSize) return yield* Effect.fail(outsideTree(`/${name}`, `${name} ${size} is beyond the latest checkpoint (tree size ${publishedSize}).`))
      return size
    })

  const inclusion = (indexParameter: string | undefined, treeSize: string | undefined): Effect.Effect<InclusionProof, InvalidProofRequest> =>
    Effect.gen(function*() {
      const index = yield* sizeParameter("index", indexParameter)
      const size = yield* treeSizeParameter("tree_size", treeSize)
      if (index >= size) return yield* Effect.fail(outsideTree("/index", `index ${index} is not in a tree of size ${size}.`))
      const subtree = yield* subtreeFor(size, (s) => inclusionProof(index, size, s))
      return inclusionProof(index, size, subtree)
    })

  /** first = 0 and first = second are valid: their proof is the empty path. */
  const consistency = (firstParameter: string | undefined, secondParameter: string | undefined): Effect.Effect<ConsistencyProof, InvalidProofRequest> =>
    Effect.gen(function*() {
      const first = yield* sizeParameter("first", firstParameter)
      const second = yield* treeSizeParameter("second", secondParameter)
      if (first > second) return yield* Effect.fail(outsideTree("/first", `first ${first} is larger than second ${second}.`))
      const subtree = yield* subtreeFor(second, (s) => consistencyProof(first, second, s))
      return consistencyProof(first, second, subtree)
    })

  /** The self-contained proof bundle of a signed receipt, once its entry is under a published checkpoint. */
  const receiptBundle = (receipt: SignedRelianceReceipt, receiptKey: EventJwk | undefined): Effect.Effect<ReceiptProofBundle, NotYetLogged> =>
    Effect.gen(function*() {
      const notYet = new NotYetLogged({ detail: `Receipt ${receipt.receipt_id} is not in a published checkpoint yet; retry shortly.`, retry_after: 1 })
      const index = yield* Effect.orDie(repo.indexOf("receipt", receipt.receipt_id))
      if (Option.isNone(index)) return yield* Effect.fail(notYet)
      const published = yield* served(index.value + 1)
      if (Option.isNone(published) || published.value.size <= index.value) return yield* Effect.fail(notYet)
      const { size, note } = published.value
      const subtree = yield* subtreeFor(size, (s) => {
        s(0, index.value)
        inclusionPath(index.value, size, s)
      })
      return receiptProofBundle({
        receipt,
        leafIndex: index.value,
        checkpoint: note,
        subtree,
        verifierKey: key.verifierKey,
        ...(receiptKey === undefined ? {} : { receiptKey })
      })
    })

  /**
   * Tries, then sleeps until this instance's log advances (or RecheckMs, for progress made by another
   * instance's integrator or witnessing, which is not announced here), until `ms` have passed.
   */
  const receiptBundleWithin = (receipt: SignedRelianceReceipt, receiptKey: EventJwk | undefined, ms: number) =>
    Effect.gen(function*() {
      const deadline = (yield* Clock.currentTimeMillis) + ms
      for (;;) {
        // Taken before trying, so a step made while trying is not missed.
        const step = nextStep
        const bundle = yield* Effect.option(receiptBundle(receipt, receiptKey))
        if (Option.isSome(bundle)) return bundle
        const left = deadline - (yield* Clock.currentTimeMillis)
        if (left <= 0) return Option.none<ReceiptProofBundle>()
        yield* Effect.timeoutOption(Deferred.await(step), Duration.millis(Math.min(left, RecheckMs)))
      }
    })

  /** Complete subtree hashes from the tile trees in memory alone; undefined when one is missing. */
  const fromTreesInMemory = <A>(size: number, compute: (subtree: SubtreeHash) => A): A | undefined => {
    if (latest === undefined || size > latest.checkpoint.size) return undefined
    const now = clock.currentTimeMillisUnsafe()
    try {
      return compute(subtreeHashesFromTileTrees(size, (tile) => cachedTree(tile, now)))
    } catch (error) {
      if (error instanceof RangeError) return undefined
      throw error
    }
  }

  const fromMemory: FromMemory = {
    tile: (path) => {
      const bundle = parseEntryBundlePath(path)
      if (bundle !== undefined) {
        const bytes = bundle.width === TileWidth ? bundles.get(String(bundle.index)) : undefined
        return bytes === undefined ? undefined : { bytes, full: true }
      }
      const tile = parseTilePath(path)
      if (tile === undefined) return undefined
      const full = tile.width === TileWidth
      if (full) {
        const tree = fullTrees.get(treeKey(tile))
        return tree === undefined ? undefined : { bytes: tree.levels[0]!, full }
      }
      const now = clock.currentTimeMillisUnsafe()
      aheadLatest(now)
      if (latest === undefined || now - latest.readAt >= CheckpointFreshMs || widthIn(latest.checkpoint.size, tile.level, tile.index) !== tile.width) return undefined
      const tree = cachedTree(tile, now)
      return tree === undefined ? undefined : { bytes: tree.levels[0]!, full }
    },
    checkpoint: () => {
      const now = clock.currentTimeMillisUnsafe()
      if (witnesses.length === 0) aheadLatest(now)
      else aheadWitnessed(now)
      const kept = witnesses.length === 0 ? latest : witnessed
      return kept !== undefined && now - kept.readAt < CheckpointFreshMs ? kept.checkpoint.note : undefined
    },
    inclusion: (index, size) => index < size ? fromTreesInMemory(size, (subtree) => inclusionProof(index, size, subtree)) : undefined,
    consistency: (first, second) => first <= second ? fromTreesInMemory(second, (subtree) => consistencyProof(first, second, subtree)) : undefined
  }

  return {
    fromMemory,
    checkpoint: Effect.withSpan(checkpoint, "TransparencyLog.checkpoint"),
    current: Effect.fn("TransparencyLog.current")(current),
    served: Effect.fn("TransparencyLog.served")(served),
    published: Effect.fn("TransparencyLog.published")(published),
    tile: Effect.fn("TransparencyLog.tile")(tile),
    inclusion: Effect.fn("TransparencyLog.inclusion")(inclusion),
    consistency: Effect.fn("TransparencyLog.consistency")(consistency),
    receiptBundle: Effect.fn("TransparencyLog.receiptBundle")(receiptBundle),
    receiptBundleWithin: Effect.fn("TransparencyLog.receiptBundleWithin")(receiptBundleWithin),
    advanced: Effect.withSpan(advanced, "TransparencyLog.advanced"),
    fetchTiles: Effect.fn("TransparencyLog.fetchTiles")(fetchTiles),
    coseReceipt: (bundle) => coseReceiptOf(bundle, key.signer),
    key: { origin: key.logOrigin, verifier_key: key.verifierKey }
  } satisfies TransparencyLogShape
})

/**
 * The log as readers see it (docs/API.md §11): the latest signed checkpoint, hash tiles and
 * entry bundles, inclusion and consistency proofs, and receipt proof bundles. Everything is served
 * from stored rows with a few small range reads (the tiles a proof touches), never the whole tree;
 * full tiles are immutable and kept in memory.
 */
export class TransparencyLog extends Context.Service<TransparencyLog, TransparencyLogShape>()("pv/TransparencyLog", {
  make: makeTransparencyLog
}) {
  static readonly layerNoDeps = Layer.effect(this, makeTransparencyLog)
  static readonly layer = this.layerNoDeps.pipe(Layer.provide([LogRepo.layer, LogKey.layer, WitnessRepo.layer]))
}
