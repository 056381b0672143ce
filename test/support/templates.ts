import { createHash } from "node:crypto"
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Layer } from "effect"
import { MetricsState } from "../../src/observability/Metrics.js"
import { AppConfig } from "../../src/platform/Config.js"
import { DatabaseLive } from "../../src/platform/Database.js"
import { createDatabase, databaseUrl, withAdmin } from "./databases.js"
import { cacheDir } from "./scratch.js"
import { testEnvironment } from "./testConfig.js"

/**
 * Migrated templates: a database with every migration applied is made once (per machine for embedded
 * PGlite, per PostgreSQL server for the real one) and copied for each test file or test server, instead
 * of initdb (PGlite) or an empty database, then every migration, each time. A template is only ever
 * seen complete: it is built under another name and renamed into place once migrated, and its name holds
 * a hash of the migrations (and of PGlite's version), so a changed migration makes a new one.
 */

const repository = fileURLToPath(new URL("../../", import.meta.url))

/** The service's database layers (every migration applied) in the test configuration, on `env`'s database. */
export const testDatabaseLayers = (env: Record<string, string>) =>
  DatabaseLive.pipe(
    Layer.provideMerge(AppConfig.layerFromEnv({ ...testEnvironment(), ...env })),
    Layer.provideMerge(MetricsState.layer)
  )

/** Applies every migration to `env`'s database, then closes it (in a memo map of its own, so nothing is shared). */
const migrate = (env: Record<string, string>) =>
  Effect.scoped(Effect.flatMap(Layer.makeMemoMap, (memoMap) =>
    Effect.flatMap(Effect.scope, (scope) => Layer.buildWithMemoMap(testDatabaseLayers(env), memoMap, scope))))

/** Names the migrated templates: a change to any migration or to PGlite makes new ones. */
const templateKey = (): string => {
  const hash = createHash("sha256")
  hash.update(readFileSync(join(repository, "node_modules/@electric-sql/pglite/package.json")))
  const migrations = join(repository, "migrations")
  for (const file of readdirSync(migrations).sort()) hash.update(file).update(readFileSync(join(migrations, file)))
  return hash.digest("hex").slice(0, 16)
}

/**
 * An embedded (PGlite) data directory with every migration applied, made once per machine in the OS temp
 * directory (support/scratch.ts, `cacheDir`). Built aside and renamed into place, so a reader never sees a half-made one; when two workers
 * build it at once, the first rename wins and the other copy is dropped.
 */
const pgliteTemplate = Effect.gen(function*() {
  const template = join(cacheDir(), `pv-service-db-${templateKey()}`)
  if (existsSync(join(template, "pgdata", "PG_VERSION"))) return template
  const building = mkdtempSync(join(cacheDir(), "pv-service-db-building-"))
  yield* migrate({ PV_DATA_DIR: building })
  try {
    renameSync(building, template)
  } catch {
    rmSync(building, { recursive: true, force: true })
  }
  return template
})

/** Puts a copy of the migrated PGlite template in `dataDir` (as `dataDir/pgdata`), so a server there starts migrated. */
export const copyMigratedPglite = (dataDir: string) =>
  Effect.map(pgliteTemplate, (template) => cpSync(join(template, "pgdata"), join(dataDir, "pgdata"), { recursive: true }))

/** Every template build, of any key, takes this advisory lock: whoever holds it may drop a build left half-done. */
const templateLock = 740_215_003

const exists = async (client: { query: (text: string, values: Array<string>) => Promise<{ rowCount: number | null }> }, name: string) =>
  ((await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])).rowCount ?? 0) > 0

/**
 * A PostgreSQL database with every migration applied, made once per server (and per migrations' hash),
 * under a session advisory lock so that workers starting together build it once; it is migrated as
 * `…_building`, closed to connections (which `CREATE DATABASE … TEMPLATE` requires), then renamed.
 * A build that died midway leaves only a `…_building` database, dropped by the next build.
 */
const postgresTemplate = async (): Promise<string> => {
  const name = `pv_test_template_${templateKey()}`
  return withAdmin(async (client) => {
    if (await exists(client, name)) return name
    await client.query("SELECT pg_advisory_lock($1)", [templateLock])
    try {
      if (await exists(client, name)) return name
      const stale = await client.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'pv\\_test\\_template\\_%\\_building'")
      for (const { datname } of stale.rows) await client.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`)
      const building = `${name}_building`
      await client.query(`CREATE DATABASE ${building}`)
      await Effect.runPromise(migrate({ DATABASE_URL: databaseUrl(building) }))
      await client.query(`ALTER DATABASE ${building} WITH ALLOW_CONNECTIONS false`)
      await client.query(`ALTER DATABASE ${building} RENAME TO ${name}`)
      return name
    } finally {
      await client.query("SELECT pg_advisory_unlock($1)", [templateLock])
    }
  })
}

let postgresTemplateName: Promise<string> | undefined

/** A fresh PostgreSQL database with every migration applied (a copy of the template), dropped by `drop`. */
export const createMigratedDatabase = async (): Promise<{ url: string; drop: () => Promise<void> }> => {
  postgresTemplateName ??= postgresTemplate()
  const template = await postgresTemplateName.catch((error: unknown) => {
    postgresTemplateName = undefined
    throw error
  })
  return createDatabase(template)
}
