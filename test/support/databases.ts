import { randomBytes } from "node:crypto"
import pg from "pg"

export type TestDatabaseKind = "pglite" | "postgres"

/** Which database the HTTP suites run on: set per vitest project (see vitest.config.ts). */
export const testDatabaseKind = (): TestDatabaseKind => (process.env.PV_TEST_DB === "postgres" ? "postgres" : "pglite")

export const adminUrl = () => process.env.PV_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

const withAdmin = async <A>(f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: adminUrl() })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

/** A fresh, empty database on the real server, so suites never see each other's rows. */
export const createScratchDatabase = async (): Promise<{ url: string; drop: () => Promise<void> }> => {
  const name = `pv_test_${randomBytes(6).toString("hex")}`
  await withAdmin((client) => client.query(`CREATE DATABASE ${name}`))
  const url = new URL(adminUrl())
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: () => withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined)
  }
}
