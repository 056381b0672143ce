import { randomBytes } from "node:crypto"
import pg from "pg"

export type TestDatabaseKind = "pglite" | "postgres"

/** Which database the HTTP suites run on: set per vitest project (see vitest.config.ts). */
export const testDatabaseKind = (): TestDatabaseKind => (process.env.PV_TEST_DB === "postgres" ? "postgres" : "pglite")

export const adminUrl = () => process.env.PV_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

/** The URL of database `name` on the test server. */
export const databaseUrl = (name: string): string => {
  const url = new URL(adminUrl())
  url.pathname = `/${name}`
  return url.toString()
}

export const withAdmin = async <A>(f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: adminUrl() })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

/** A new database on the real server, a copy of `template`, dropped by `drop`. */
export const createDatabase = async (template = "template1"): Promise<{ url: string; drop: () => Promise<void> }> => {
  const name = `pv_test_${randomBytes(6).toString("hex")}`
  await withAdmin((client) => client.query(`CREATE DATABASE ${name} TEMPLATE ${template}`))
  return {
    url: databaseUrl(name),
    drop: () => withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined)
  }
}

/** A fresh, empty database on the real server, so suites never see each other's rows. */
export const createScratchDatabase = () => createDatabase()
