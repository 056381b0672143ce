// The transparency log in the benches: its published size, and entries appended in bulk (PostgreSQL only).
import pg from "pg"

/** The published tree size (GET /log/checkpoint: origin, size, root). */
export const treeSize = async (baseUrl: string): Promise<number> => Number((await (await fetch(`${baseUrl}/log/checkpoint`)).text()).split("\n")[1])

/**
 * Appends `count` receipt-shaped entries straight into the log's queue of the database at `databaseUrl`, as a burst
 * of writes would, and times how long the integrator takes to cover all of them with a signed checkpoint.
 */
export const bulkAppend = async (
  databaseUrl: string,
  baseUrl: string,
  count: number
): Promise<{ entries: number; seconds: number; perSecond: number; size: number }> => {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  const target = (await treeSize(baseUrl)) + count
  const first = Date.now() * 1000
  const started = Date.now()
  for (let done = 0; done < count; done += 50_000) {
    const n = Math.min(50_000, count - done)
    await client.query(
      `INSERT INTO log_pending (kind, ref, entry)
       SELECT 'receipt', 'rr_BENCH' || lpad(g::text, 22, '0'),
         convert_to('{"created_at":"2026-01-01T00:00:00.000Z","receipt_digest":"' || encode(sha256(g::text::bytea), 'hex') ||
           '","receipt_id":"rr_BENCH' || lpad(g::text, 22, '0') || '","type":"pv.log.receipt.v1"}', 'UTF8')
       FROM generate_series($1::bigint, $2::bigint) g`, [first + done, first + done + n - 1])
  }
  await client.end()
  let size = await treeSize(baseUrl)
  while (size < target) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    size = await treeSize(baseUrl)
  }
  const seconds = (Date.now() - started) / 1000
  return { entries: count, seconds, perSecond: count / seconds, size }
}
