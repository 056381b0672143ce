// `npm run bench:tool -- promotion [--statements N] [--size S] [--fibers F] [--variants a,b,…]`: what a statement's
// parameter costs the garbage collector, with no service around it. Each variant runs in child processes on the
// service's V8 settings (`--max-semi-space-size=8 --no-allocation-site-pretenuring`) plus `--trace-gc-nvp`: F fibers
// (default 16) run statements one after another, each with a fresh text parameter of S characters (default 2,500, a
// receipt's JSON) and ~40 KB of short-lived garbage around it, so young collections come about as often per statement
// as under the receipt load (one per ~40). It prints the bytes young collections promote per statement: the variant
// run with N and with 3N statements (default 20,000), the difference over 2N, so start-up's promotion cancels out.
// Variants:
// - statement: `sql\`SELECT length(${text}::text)\`` through @effect/sql-pg (16 connections, pipelined as the service
//   runs it), yielded by the fiber's loop itself;
// - statement-nomultiplex: the same with @effect/sql-pg's pipelining off;
// - gen-statement: the same statement yielded from an `Effect.gen` of its own that holds the text;
// - gen-sleep: that `Effect.gen` waiting 1 ms on a timer instead (no statement);
// - gen-pg: that `Effect.gen` waiting on `pg`'s query with the text (Effect.promise);
// - promise-pg: the same Effect.promise of `pg`'s query, yielded by the fiber's loop itself;
// - async-pg: `pg` alone, from an async function holding the text.
// The statements need no table: they run on DATABASE_URL (default the local postgres database).
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import pg from "pg"

const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const AllVariants = ["statement", "statement-nomultiplex", "gen-statement", "gen-sleep", "gen-pg", "promise-pg", "async-pg"] as const
type Variant = typeof AllVariants[number]
const GarbageObjects = 640

// Each object escapes to `sink`, so the optimising compiler cannot elide the allocations.
let sink: unknown
/** ~40 KB of objects that die at once. */
const garbage = () => {
  for (let i = 0; i < GarbageObjects; i++) sink = { i, pair: [i, i + 1], text: `g${i}` }
}

/** The child: `statements` statements of `variant` at `fibers`, then exit. */
const child = async (variant: Variant, statements: number, size: number, fibers: number) => {
  let done = 0
  const textOf = (i: number) => `${i}:${"x".repeat(size)}`
  if (variant === "async-pg") {
    const pool = new pg.Pool({ connectionString: url, max: 16 })
    const held = async (text: string) => {
      const kept = { text, copy: `${text}!` }
      const result = await pool.query("SELECT length($1::text) AS n", [kept.text])
      return result.rows.length === 1 && kept.copy.length > 0
    }
    const worker = async () => {
      while (done < statements) {
        garbage()
        if (!(await held(textOf(done)))) throw new Error("no row")
        garbage()
        done++
      }
    }
    await Promise.all(Array.from({ length: fibers }, worker))
    await pool.end()
    return
  }
  const pool = variant === "gen-pg" || variant === "promise-pg" ? new pg.Pool({ connectionString: url, max: 16 }) : undefined
  const query = (text: string) => Effect.promise(() => pool!.query("SELECT length($1::text) AS n", [text]).then((result) => result.rows))
  const program = Effect.gen(function*() {
    const sql = yield* PgClient.PgClient
    const one = (text: string): Effect.Effect<boolean, unknown> => {
      if (variant === "statement" || variant === "statement-nomultiplex") {
        return Effect.map(sql`SELECT length(${text}::text) AS n`, (rows) => rows.length === 1)
      }
      if (variant === "promise-pg") return Effect.map(query(text), (rows) => rows.length === 1)
      return Effect.gen(function*() {
        const kept = { text, copy: `${text}!` }
        const rows: ReadonlyArray<unknown> = variant === "gen-statement"
          ? yield* sql`SELECT length(${kept.text}::text) AS n`
          : variant === "gen-pg"
          ? yield* query(kept.text)
          : yield* Effect.as(Effect.sleep(1), [1])
        return rows.length === 1 && kept.copy.length > 0
      })
    }
    const worker = Effect.gen(function*() {
      while (done < statements) {
        garbage()
        if (!(yield* one(textOf(done)))) throw new Error("no row")
        garbage()
        done++
      }
    })
    yield* Effect.all(Array.from({ length: fibers }, () => worker), { concurrency: "unbounded", discard: true })
  })
  const client = PgClient.layer({ url: Redacted.make(url), maxConnections: 16, multiplex: variant !== "statement-nomultiplex" })
  await Effect.runPromise(program.pipe(Effect.provide(client)))
  await pool?.end()
}

/** Bytes young collections promoted in one child run (its `--trace-gc-nvp` lines). */
const promotedIn = (variant: Variant, statements: number, size: number, fibers: number): Promise<number> =>
  new Promise((resolve, reject) => {
    const flags = ["--max-semi-space-size=8", "--no-allocation-site-pretenuring", "--trace-gc-nvp", "--import", "tsx"]
    const args = [...flags, fileURLToPath(import.meta.url), "--child", variant, String(statements), String(size), String(fibers)]
    const run = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    run.stdout.on("data", (chunk) => (out += chunk))
    run.stderr.on("data", (chunk) => (err += chunk))
    run.once("exit", (code) => {
      if (code !== 0) return reject(new Error(`${variant} failed (${code}): ${err.slice(-2000)}`))
      let promoted = 0
      for (const line of out.split("\n")) {
        if (!line.includes(" gc=s ")) continue
        const match = / promoted=(\d+) /.exec(line)
        if (match !== null) promoted += Number(match[1])
      }
      resolve(promoted)
    })
  })

const argv = process.argv.slice(2)
if (argv[0] === "--child") {
  await child(argv[1] as Variant, Number(argv[2]), Number(argv[3]), Number(argv[4]))
  process.exit(sink === undefined ? 1 : 0)
}
const flag = (name: string, fallback: string) => {
  const i = argv.indexOf(`--${name}`)
  return i === -1 ? fallback : argv[i + 1] ?? fallback
}
const statements = Number(flag("statements", "20000"))
const size = Number(flag("size", "2500"))
const fibers = Number(flag("fibers", "16"))
const variants = flag("variants", AllVariants.join(",")).split(",") as Array<Variant>
for (const [name, value] of [["statements", statements], ["size", size], ["fibers", fibers]] as const) {
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} must be a whole number > 0`)
}
const unknown = variants.filter((variant) => !(AllVariants as ReadonlyArray<string>).includes(variant))
if (unknown.length > 0) throw new Error(`unknown variants ${unknown.join(", ")}: one of ${AllVariants.join(", ")}`)

console.log(`promoted by young collections per statement (${size}-character parameter, ${fibers} fibers, ${statements} and ${3 * statements} statements a run)`)
for (const variant of variants) {
  const short = await promotedIn(variant, statements, size, fibers)
  const long = await promotedIn(variant, 3 * statements, size, fibers)
  console.log(`  ${variant.padEnd(22)} ${((long - short) / (2 * statements)).toFixed(0).padStart(6)} B`)
}
