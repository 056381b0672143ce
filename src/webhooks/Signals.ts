/**
 * What a receiver's answer tells the delivery worker beyond "failed" (docs/API.md §10.5, "Receivers' signals"):
 * `410 Gone` disables the subscription at once; `429` or `503` with `Retry-After` defers its next attempt to
 * at least that time, at most an hour away, and never sooner than the backoff would have. Pure: the worker
 * and the property tests (test/webhooks/signals.test.ts) call the same functions.
 */

/** The longest a `Retry-After` defers an attempt. */
export const MaxRetryAfterMs = 60 * 60 * 1000

/** The statuses whose `Retry-After` is honoured. */
export const isDeferringStatus = (status: number): boolean => status === 429 || status === 503

const Months: ReadonlyArray<string> = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
const Day = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
const LongDay = "(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
const Month = `(${Months.join("|")})`
const Time = "(\\d{2}):(\\d{2}):(\\d{2})"
// RFC 9110 §5.6.7: IMF-fixdate, and the two obsolete forms a recipient must still accept.
const ImfFixdate = new RegExp(`^${Day}, (\\d{2}) ${Month} (\\d{4}) ${Time} GMT$`)
const Rfc850 = new RegExp(`^${LongDay}, (\\d{2})-${Month}-(\\d{2}) ${Time} GMT$`)
const Asctime = new RegExp(`^${Day} ${Month} ([ \\d]\\d) ${Time} (\\d{4})$`)
const DelaySeconds = /^\d+$/

/** Milliseconds since the epoch of a valid calendar date and time (UTC), else null (no 31 Feb, no 25:00). */
const utc = (year: number, month: string, day: number, hour: number, minute: number, second: number): number | null => {
  const m = Months.indexOf(month)
  if (hour > 23 || minute > 59 || second > 60) return null
  const at = Date.UTC(year, m, day, hour, minute, Math.min(second, 59))
  const date = new Date(at)
  return date.getUTCFullYear() === year && date.getUTCMonth() === m && date.getUTCDate() === day ? at : null
}

/**
 * An HTTP-date (RFC 9110 §5.6.7) as milliseconds since the epoch; null when `value` is not one. `nowMs`
 * places an obsolete two-digit year (one more than 50 years ahead is the previous century's).
 */
export const parseHttpDate = (value: string, nowMs: number): number | null => {
  let match = ImfFixdate.exec(value)
  if (match !== null) return utc(Number(match[3]), match[2]!, Number(match[1]), Number(match[4]), Number(match[5]), Number(match[6]))
  match = Rfc850.exec(value)
  if (match !== null) {
    const yy = Number(match[3])
    const thisYear = new Date(nowMs).getUTCFullYear()
    let year = Math.floor(thisYear / 100) * 100 + yy
    if (year > thisYear + 50) year -= 100
    return utc(year, match[2]!, Number(match[1]), Number(match[4]), Number(match[5]), Number(match[6]))
  }
  match = Asctime.exec(value)
  if (match !== null) return utc(Number(match[6]), match[1]!, Number(match[2]!.trim()), Number(match[3]), Number(match[4]), Number(match[5]))
  return null
}

/**
 * How long a `Retry-After` value asks to wait from `nowMs`: delta-seconds or an HTTP-date, capped at
 * `MaxRetryAfterMs`; a date in the past is 0. Null when absent or not a valid value (then it is ignored).
 */
export const retryAfterMs = (value: string | undefined, nowMs: number): number | null => {
  if (value === undefined) return null
  const text = value.trim()
  if (DelaySeconds.test(text)) return Math.min(MaxRetryAfterMs, Number(text) * 1000)
  const at = parseHttpDate(text, nowMs)
  return at === null ? null : Math.min(MaxRetryAfterMs, Math.max(0, at - nowMs))
}

/** What a failed attempt's answer decides beyond the backoff. */
export interface ReceiverSignal {
  /** 410 Gone: the subscription is disabled at once. */
  readonly gone: boolean
  /** The delay before the next attempt: the backoff's, or the receiver's `Retry-After` when that is later. */
  readonly retryMs: number
}

/** A failed attempt's answer (`status`, its `Retry-After`) and the backoff's delay → what the worker does next. */
export const receiverSignal = (
  answer: { readonly status?: number | undefined; readonly retryAfter?: string | undefined },
  backoffMs: number,
  nowMs: number
): ReceiverSignal => {
  const status = answer.status ?? 0
  const asked = isDeferringStatus(status) ? retryAfterMs(answer.retryAfter, nowMs) : null
  return { gone: status === 410, retryMs: Math.max(backoffMs, asked ?? 0) }
}

/** Whom a failed attempt holds back (docs/API.md §10.5): the origin's subscriptions, the exact URL's, or none but itself. */
export type HoldScope = "origin" | "url" | "none"

/**
 * Whom a failed attempt's failure holds back behind a probe (docs/API.md §10.5): the group the attempt classified
 * it for (webhooks/Send.ts: the receiver's as a whole, "origin", or this URL's), narrowed by what got through
 * while the attempt was under way, as this instance saw it (the latest 2xx from the same origin, and from the same
 * URL): when the same URL got a delivery through after the attempt began, the failure holds back nobody else (the
 * URL works: what failed was this one delivery); when only another path of the origin did, a receiver's failure
 * holds back only this URL's subscriptions (the receiver is up: the path is what hangs or fails). The receiver's
 * own asks to slow down (429, 503) keep their group whatever got through meanwhile.
 */
export const holdScope = (
  failure: { readonly scope: "origin" | "url"; readonly status?: number | undefined },
  startedAtMs: number,
  answeredAtMs: { readonly origin: number | undefined; readonly url: number | undefined }
): HoldScope => {
  if (isDeferringStatus(failure.status ?? 0)) return failure.scope
  if (answeredAtMs.url !== undefined && answeredAtMs.url > startedAtMs) return "none"
  if (failure.scope === "origin" && answeredAtMs.origin !== undefined && answeredAtMs.origin > startedAtMs) return "url"
  return failure.scope
}
