import pg from "pg"
import { expect } from "vitest"
import { Deployment, sleep } from "../support/childServer.js"
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.js"
import { determination, postgresTarget, provisionKey, putDetermination } from "./service.js"
import { answer } from "./wire.js"

/**
 * What the read-your-writes fault files share (docs/ARCHITECTURE.md, "Read your writes"): two instances of
 * two workers each (PV_WORKERS=2) on one scratch PostgreSQL database, the second over a slow link (a TCP
 * proxy delaying what the database sends by 10 ms), so its workers hear of a change well after the writer's
 * answer could reach a client. The trials (readYourWrites.test.ts) and the killed LISTEN connection
 * (readYourWritesListen.test.ts) are files of their own, each with its own pair: the trials have no
 * wall-clock bound and run beside other fault files; the LISTEN test bounds a PUT by a lease length and
 * runs alone.
 */
export interface TwoInstances {
  readonly bases: ReadonlyArray<string>
  readonly key: string
  /** A plain client of the pair's database. */
  readonly client: pg.Client
  readonly digestOn: (base: string, subject: string) => Promise<string>
  readonly put: (base: string, subject: string, revision: number) => Promise<{ digest: string; ms: number }>
  /** 503s asked again so far. */
  readonly unavailable: () => number
  readonly dispose: () => Promise<void>
}

export const startTwoInstances = async (): Promise<TwoInstances> => {
  const deployment = await Deployment.create("postgres", { env: { PV_WORKERS: "2" } })
  let proxy: TcpProxy | undefined
  let client: pg.Client | undefined
  const dispose = async () => {
    await client?.end()
    await deployment.dispose()
    await proxy?.close()
  }
  try {
    proxy = await startTcpProxy(postgresTarget(), { latencyMs: 10 })
    const slowUrl = new URL(deployment.databaseUrl!)
    slowUrl.hostname = "127.0.0.1"
    slowUrl.port = String(proxy.port)
    const bases = (await Promise.all([deployment.start(), deployment.start({ DATABASE_URL: slowUrl.toString() })])).map((started) => started.baseUrl)
    const key = await provisionKey(bases[0]!)
    client = new pg.Client({ connectionString: deployment.databaseUrl })
    await client.connect()

    /** A 503 (a database round trip timed out on a crowded machine) is no answer at all: asked again. */
    let unavailable = 0
    const retried = async (ask: () => ReturnType<typeof answer>) => {
      for (let attempt = 1; ; attempt++) {
        const reply = await ask()
        if (reply.status !== 503 || attempt === 5) return reply
        unavailable++
        await sleep(100)
      }
    }
    const digestOn = async (base: string, subject: string): Promise<string> => {
      const reply = await retried(() => answer(base, "GET", `/api/v1/trust/${subject}/machine`, { bearer: key, timeoutMs: 10_000 }))
      expect(reply.status, reply.text).toBe(200)
      return reply.body.determination.determination_digest as string
    }
    const put = async (base: string, subject: string, revision: number): Promise<{ digest: string; ms: number }> => {
      const started = performance.now()
      const reply = await retried(() => putDetermination(base, subject, determination(revision), 10_000))
      expect([200, 201], reply.text).toContain(reply.status)
      return { digest: reply.body.determination_digest as string, ms: performance.now() - started }
    }
    return { bases, key, client, digestOn, put, unavailable: () => unavailable, dispose }
  } catch (error) {
    await dispose()
    throw error
  }
}
