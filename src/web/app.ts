/**
 * The page's behaviour: three forms, each rendering into its result area, and the event chain followed
 * live. Every check is delegated to ./browser.ts (bundled as /web/verify.js: the same verifiers as the
 * client module, and the live stream's parser), which this module imports at run time as `./verify.js`
 * (src/web/Bundle.ts): this file only fetches, parses and shows. The DOM is built with textContent only (the
 * page's CSP enforces Trusted Types with no policy, so markup from a string cannot happen). The API key lives
 * in its input field, and in an open stream's request while it is followed; never in storage, cookies or the URL.
 *
 * What the service answers is read through `Loose<T>` views of the API's own types (the HttpApi schemas'
 * `Type`s): a field name that is not in the API fails to compile, while every value is still checked here
 * before use, so a malformed or hostile answer is shown as such, never trusted.
 */
import type { MachineTrustResponse } from "../domain/MachineTrust.js"
import type { EventJwks, EventPage } from "../domain/TrustEvent.js"
import type { LogKeyInfo } from "../log/Api.js"
import {
  type Arrival,
  type ChainHead,
  type ChainReport,
  checkArrival,
  cryptoAvailable,
  evidenceKindOf,
  evidenceOfText,
  type EvidenceKind,
  type EvidenceStep,
  type EvidenceVerdict,
  type EvidenceVerifyOptions,
  keyring,
  sseParser,
  textOfFile,
  verifyEventChain,
  verifyEvidence,
  verifyReceiptBundle
} from "./browser.js"

/** An answer of the API seen through its type's field names, each value still unchecked. */
type Loose<T> = { readonly [K in keyof T]?: unknown }

type JsonRecord = Record<string, unknown>
type Tone = "ok" | "bad" | "warn" | "info"
type Child = Node | string | null | undefined | false

const EventPageSize = 1000

const isRecord = (u: unknown): u is JsonRecord => typeof u === "object" && u !== null && !Array.isArray(u)

/** `value` as a view of the API type `T` when it is an object, else an empty one. */
const loose = <T>(value: unknown): Loose<T> => (isRecord(value) ? value : {}) as Loose<T>

const arrayOf = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

const el = (tag: string, attributes: Record<string, string> = {}, ...children: ReadonlyArray<Child>): HTMLElement => {
  const node = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value)
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    node.append(typeof child === "string" ? document.createTextNode(child) : child)
  }
  return node
}

const byId = (id: string): HTMLElement => {
  const node = document.getElementById(id)
  if (node === null) throw new Error(`the page has no #${id}`)
  return node
}

const inputById = (id: string) => byId(id) as HTMLInputElement | HTMLTextAreaElement

const text = (value: unknown): string => (typeof value === "string" ? value : JSON.stringify(value) ?? String(value))

const mono = (code: string) => el("code", {}, code)

const badge = (label: string, tone: Tone) => el("span", { class: `badge ${tone}` }, label)

const tick = (ok: boolean, label?: string) =>
  el("span", { class: `tick ${ok ? "ok" : "bad"}`, "data-ok": String(ok) }, ok ? "✓" : "✗", label ? ` ${label}` : "")

/** An instant as given, and in the reader's own time zone. */
const instant = (iso: unknown) => {
  const shownIso = text(iso)
  const ms = typeof iso === "string" ? Date.parse(iso) : NaN
  return el("span", {}, mono(shownIso), Number.isNaN(ms) ? "" : el("span", { class: "muted" }, ` (${new Date(ms).toLocaleString()})`))
}

const list = (items: ReadonlyArray<unknown>, empty = "none") =>
  items.length === 0 ? el("p", { class: "muted" }, empty) : el("ul", {}, ...items.map((item) => el("li", {}, text(item))))

const show = (target: HTMLElement, ...nodes: ReadonlyArray<Node | string>) => target.replaceChildren(...nodes)

const working = (message: string) => el("p", { class: "muted working" }, message)

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error))

// ---------------------------------------------------------------------------------------------------
// Fetching: JSON bodies, and problem+json shown as what it says.

type Problem = { readonly ok: false; readonly problem: HTMLElement }
type Fetched = { readonly ok: true; readonly body: unknown; readonly response: Response } | Problem

const getJson = async (url: string, init: RequestInit = {}): Promise<Fetched> => {
  let response: Response
  try {
    response = await fetch(url, { ...init, headers: { accept: "application/json", ...init.headers }, cache: "no-store" })
  } catch (error) {
    return { ok: false, problem: problemBox("The service did not answer", messageOf(error)) }
  }
  const raw = await response.text()
  let body: unknown
  try {
    body = raw.length === 0 ? undefined : JSON.parse(raw)
  } catch {
    body = undefined
  }
  if (response.ok) return { ok: true, body, response }
  return { ok: false, problem: problemView(response, body, raw) }
}

const problemBox = (title: string, detail: string, extra: ReadonlyArray<Node> = []) =>
  el("div", { class: "problem", role: "alert" }, el("p", { class: "problem-title" }, title), el("p", {}, detail), ...extra)

/** The fields of an RFC 9457 problem document as the service sends them (contract §1). */
interface ProblemDocument {
  readonly title: string
  readonly detail: string
  readonly code: string
  readonly instance: string
  readonly errors: ReadonlyArray<{ readonly pointer: string; readonly detail: string }>
}

/** An RFC 9457 problem document, readably; anything else as its status and text. */
const problemView = (response: Response, body: unknown, raw: string) => {
  const retryAfter = response.headers.get("retry-after")
  const retry = retryAfter === null ? null : el("p", { class: "muted" }, `Retry after ${retryAfter} second(s).`)
  const problem = loose<ProblemDocument>(body)
  if (typeof problem.title === "string") {
    const box = problemBox(
      `${response.status} ${problem.title}`,
      typeof problem.detail === "string" ? problem.detail : "",
      [
        ...(Array.isArray(problem.errors)
          ? [el("ul", {}, ...problem.errors.map((e: unknown) => {
            const error = loose<ProblemDocument["errors"][number]>(e)
            return el("li", {}, isRecord(e) ? `${text(error.pointer)}: ${text(error.detail)}` : text(e))
          }))]
          : []),
        el("p", { class: "muted" }, "code ", mono(text(problem.code ?? "(none)")), typeof problem.instance === "string" ? ` · ${problem.instance}` : ""),
        ...(retry === null ? [] : [retry])
      ]
    )
    box.dataset.status = String(response.status)
    box.dataset.code = text(problem.code ?? "")
    return box
  }
  const box = problemBox(`${response.status} ${response.statusText}`, raw.slice(0, 500), retry === null ? [] : [retry])
  box.dataset.status = String(response.status)
  return box
}

// ---------------------------------------------------------------------------------------------------
// 1. A determination, through the open /human endpoint.

const RelianceRule =
  "A successful resolution is not permission to rely: check freshness CURRENT, lifecycle, authority and claim scope before relying."

const freshnessTone = (state: unknown): Tone => (state === "CURRENT" ? "ok" : state === "APPROACHING_STALE" ? "warn" : "bad")

const lifecycleTone = (state: unknown): Tone => (state === "ACTIVE" ? "ok" : state === "NOT_ISSUED" ? "info" : "bad")

const fact = (title: string, tone: Tone, body: ReadonlyArray<Node | string>, testId: string) =>
  el("div", { class: `fact ${tone}`, "data-fact": testId }, el("h4", {}, title), ...body)

type Trust = MachineTrustResponse

const trustView = (publicId: string, doc: Loose<Trust>) => {
  if (doc.schema !== "pv.machine-trust.v1") {
    return problemBox("Not a trust document", `The answer's schema is ${text(doc.schema)}, not pv.machine-trust.v1: do not use it.`)
  }
  const determination = loose<Trust["determination"]>(doc.determination)
  const freshness = loose<Trust["freshness"]>(doc.freshness)
  const lifecycle = loose<Trust["lifecycle"]>(doc.lifecycle)
  const authority = loose<Trust["authority"]>(doc.authority)
  const integrity = loose<Trust["integrity"]>(doc.integrity)
  const head = loose<Trust["integrity"]["event_head"]>(integrity.event_head)
  const subject = loose<Trust["subject"]>(doc.subject)
  const policy = loose<Trust["policy"]>(doc.policy)
  const claims = arrayOf(doc.claims)
  const notAuthorized = authority.issuance_authorized === false && authority.authority_state === "NOT_AUTHORIZED"

  return el("article", { class: "card", "data-public-id": publicId },
    el("header", { class: "card-head" },
      el("h3", {}, publicId),
      el("span", { class: "tier", "data-tier": text(determination.tier) }, `Tier ${text(determination.tier)}`),
      determination.eligible === true ? badge("eligible", "ok") : badge("not eligible", "bad")),
    el("p", { class: "banner warn", "data-rule": "reliance" }, RelianceRule),
    el("div", { class: "facts" },
      fact("Freshness", freshnessTone(freshness.state), [
        el("p", { class: "state" }, text(freshness.state)),
        el("p", {}, "as of ", instant(freshness.as_of)),
        el("p", {}, "valid until ", instant(freshness.valid_until)),
        el("p", { class: "muted" }, freshness.state === "CURRENT" ? "Current: this check passes." : "Not CURRENT: do not rely on it.")
      ], "freshness"),
      fact("Lifecycle", lifecycleTone(lifecycle.state), [
        el("p", { class: "state" }, text(lifecycle.state)),
        el("p", { class: "muted" }, "Rely only if this state fits what you intend to do.")
      ], "lifecycle"),
      fact("Authority", notAuthorized ? "info" : "bad", [
        el("p", { class: "state" }, `issuance ${text(authority.authority_state)}`),
        el("p", {}, notAuthorized ? "No credential has been issued; none may be inferred." : "Unexpected authority state: do not rely on it."),
        el("p", { class: "muted" }, `issuance_authorized: ${text(authority.issuance_authorized)} · signing keys: ${text(authority.signing_key_count)}`)
      ], "authority"),
      fact("Claim scope", "info", [
        el("p", {}, "Rely only on the claims allowed here:"),
        list(arrayOf(doc.allowed_claims))
      ], "claims")),
    el("div", { class: "prohibited", "data-fact": "prohibited" },
      el("h4", {}, "Prohibited inferences"),
      el("p", {}, "Do not conclude any of these from this document:"),
      list(arrayOf(doc.prohibited_inferences)),
      el("p", { class: "muted" }, "Nor that a credential was issued: no response of this service means that.")),
    el("details", {},
      el("summary", {}, "Details: why this tier, claims, subject, integrity"),
      el("div", { class: "details" },
        el("h4", {}, "Why this tier"), list(arrayOf(determination.why_this_tier)),
        el("h4", {}, "Why not higher"), list(arrayOf(determination.why_not_higher)),
        el("h4", {}, "Claims"),
        claims.length === 0
          ? el("p", { class: "muted" }, "none")
          : el("table", {},
            el("thead", {}, el("tr", {}, el("th", {}, "type"), el("th", {}, "value"), el("th", {}, "scope"))),
            el("tbody", {}, ...claims.map((c) => {
              const claim = loose<Trust["claims"][number]>(c)
              return el("tr", {}, el("td", {}, text(claim.type)), el("td", {}, text(claim.value)), el("td", {}, text(claim.scope)))
            }))),
        el("h4", {}, "Limitations"), list(arrayOf(doc.limitations)),
        el("h4", {}, "Subject"),
        el("p", {}, mono(text(subject.subject_id)), " · identity ", text(subject.identity_state)),
        el("h4", {}, "Integrity"),
        el("dl", {},
          el("dt", {}, "trust_state_digest"), el("dd", {}, mono(text(doc.trust_state_digest))),
          el("dt", {}, "determination_digest"), el("dd", {}, mono(text(determination.determination_digest))),
          el("dt", {}, "event head"), el("dd", {}, `sequence ${text(head.sequence)} `, mono(text(head.eventHash))),
          el("dt", {}, "policy"), el("dd", {}, `${text(policy.policy_id)} ${text(policy.policy_version)}`)))))
}

const lookUp = async (publicId: string) => {
  const target = byId("lookup-result")
  show(target, working(`Looking up ${publicId}…`))
  const fetched = await getJson(`/api/v1/trust/${encodeURIComponent(publicId)}/human`)
  if (!fetched.ok) return show(target, fetched.problem)
  if (!isRecord(fetched.body)) return show(target, problemBox("Unexpected answer", "The service's answer is not a JSON object."))
  show(target, trustView(publicId, loose<Trust>(fetched.body)))
  history.replaceState(null, "", `?id=${encodeURIComponent(publicId)}`)
}

// ---------------------------------------------------------------------------------------------------
// 2. The event chain.

const isHead = (value: unknown): value is ChainHead => {
  const head = loose<EventPage["head"]>(value)
  return isRecord(value) && Number.isSafeInteger(head.sequence) && (head.eventHash === null || typeof head.eventHash === "string")
}

const serviceJwks = async (): Promise<{ readonly ok: true; readonly jwks: unknown } | Problem> => {
  const fetched = await getJson("/api/v1/events/keys")
  return fetched.ok ? { ok: true, jwks: fetched.body } : fetched
}

/** Every page from the start, following next_after; the head is the one the last page reports. */
const fetchFeed = async (
  publicId: string,
  apiKey: string
): Promise<{ readonly ok: true; readonly events: ReadonlyArray<unknown>; readonly head: ChainHead } | Problem> => {
  const events: Array<unknown> = []
  let after = 0
  for (;;) {
    const fetched = await getJson(
      `/api/v1/events?public_id=${encodeURIComponent(publicId)}&after=${after}&limit=${EventPageSize}`,
      { headers: { authorization: `Bearer ${apiKey}` } }
    )
    if (!fetched.ok) return fetched
    const page = loose<EventPage>(fetched.body)
    if (!Array.isArray(page.events) || !isHead(page.head)) {
      return { ok: false, problem: problemBox("Unexpected answer", "The event page is not { events, next_after, head }.") }
    }
    events.push(...page.events)
    if (page.next_after === null) return { ok: true, events, head: page.head }
    if (typeof page.next_after !== "number" || !Number.isSafeInteger(page.next_after) || page.next_after <= after) {
      return { ok: false, problem: problemBox("Unexpected answer", `next_after ${text(page.next_after)} does not advance past ${after}.`) }
    }
    after = page.next_after
  }
}

const short = (value: unknown) => (typeof value === "string" && value.length > 20 ? `${value.slice(0, 12)}…${value.slice(-6)}` : text(value))

const chainView = (
  report: ChainReport,
  about: { readonly publicId: string | undefined; readonly source: string; readonly keySource: string; readonly head: unknown }
) => {
  const name = about.publicId ?? "this chain"
  const verdict = report.ok
    ? el("p", { class: "verdict ok", "data-verdict": "ok" },
      `Chain verified: ${report.count} event(s) of ${name}`,
      report.count > 0 ? ` (sequences 1–${report.head.sequence})` : "",
      about.head === undefined ? ", with no head to compare the end with" : ", ending at the head the service reports",
      ". Every hash, link and signature checks out.")
    : el("p", { class: "verdict bad", "data-verdict": "failed", "data-sequence": String(report.sequence), "data-reason": report.reason },
      `Chain broken at sequence ${report.sequence} (${report.reason}): ${report.detail}. `,
      `${report.verified} event(s) before it verified.`)
  const failedAt = report.ok ? undefined : report.sequence
  const rows = report.events.map((check) => {
    const failing = check.sequence === failedAt
    return el("tr", { class: failing ? "failing" : "", "data-sequence": text(check.sequence) },
      el("td", {}, text(check.sequence)),
      el("td", {}, check.malformed === null ? text(check.type) : el("span", { class: "bad-text" }, `malformed: ${check.malformed}`)),
      el("td", { "data-check": "hash" }, tick(check.hash_ok)),
      el("td", { "data-check": "link" }, tick(check.link_ok)),
      el("td", { "data-check": "signature" }, tick(check.signature_ok, check.kid === null ? "" : `kid ${check.kid}`)))
  })
  return el("div", { class: "card" },
    verdict,
    el("p", { class: "muted" }, `${about.source}; keys: ${about.keySource}.`),
    report.events.length === 0
      ? el("p", { class: "muted" }, "The chain has no events.")
      : el("table", { class: "events" },
        el("thead", {}, el("tr", {}, el("th", {}, "seq"), el("th", {}, "type"), el("th", {}, "hash"), el("th", {}, "link"), el("th", {}, "signature"))),
        el("tbody", {}, ...rows)),
    report.ok && report.events.length > 0
      ? el("p", { class: "muted" }, "Head: sequence ", String(report.head.sequence), " ", mono(short(report.head.eventHash)))
      : "")
}

const verifyFetchedChain = async () => {
  const target = byId("chain-result")
  const publicId = inputById("public-id").value.trim()
  const apiKey = inputById("api-key").value.trim()
  if (publicId === "") return show(target, problemBox("No public id", "Type the determination's public id in section 1 first."))
  if (apiKey === "") return show(target, problemBox("No API key", "The event feed needs an API key with scope trust:read; or paste a saved feed."))
  show(target, working(`Fetching the event feed of ${publicId}…`))
  const [feed, keys] = await Promise.all([fetchFeed(publicId, apiKey), serviceJwks()])
  if (!feed.ok) return show(target, feed.problem)
  if (!keys.ok) return show(target, keys.problem)
  show(target, working(`Verifying ${feed.events.length} event(s)…`))
  const report = await verifyEventChain(feed.events, keys.jwks, { publicId, head: feed.head })
  show(target, chainView(report, { publicId, source: `Fetched ${feed.events.length} event(s) from this service`, keySource: "this service's /api/v1/events/keys", head: feed.head }))
}

/** A saved feed: an event page, optionally with the JWKS it was checked against. */
type SavedFeed = EventPage & { readonly jwks: EventJwks }

const verifyPastedChain = async () => {
  const target = byId("chain-result")
  let saved: unknown
  try {
    saved = JSON.parse(inputById("feed-json").value)
  } catch (error) {
    return show(target, problemBox("Not JSON", `The pasted feed does not parse: ${messageOf(error)}`))
  }
  const record = loose<SavedFeed>(saved)
  const events = Array.isArray(saved) ? saved : Array.isArray(record.events) ? record.events : undefined
  if (events === undefined) return show(target, problemBox("Not a feed", "Paste an event page ({ events, … }) or an array of events."))
  const publicId = typeof record.public_id === "string" ? record.public_id : undefined
  const head = isHead(record.head) ? record.head : undefined
  show(target, working(`Verifying ${events.length} pasted event(s)…`))
  // The service's keys win; a saved JWKS is used only when the service's cannot be fetched.
  const keys = await serviceJwks()
  let jwks: unknown
  let keySource: string
  if (keys.ok) {
    jwks = keys.jwks
    keySource = "this service's /api/v1/events/keys"
  } else if (isRecord(record.jwks)) {
    jwks = record.jwks
    keySource = "the jwks in the pasted feed (the service's keys could not be fetched)"
  } else return show(target, keys.problem)
  const report = await verifyEventChain(events, jwks, { ...(publicId === undefined ? {} : { publicId }), ...(head === undefined ? {} : { head }) })
  show(target, chainView(report, { publicId, source: `Pasted: ${events.length} event(s)${head === undefined ? ", no head" : ""}`, keySource, head }))
}

// ---------------------------------------------------------------------------------------------------
// 2b. The event chain, followed live: GET /api/v1/events/stream read with fetch (EventSource cannot send
// the key), each event checked by ./browser.ts (src/web/live.ts) as it arrives.

const StreamEventName = "pv.trust.event"
/** The first wait before reconnecting; it doubles on each failure up to ReconnectMaxMs, and resets once connected. */
const ReconnectMs = 1_000
const ReconnectMaxMs = 15_000
/** The service sends a comment at least every 15 s: three missed in a row means the connection is dead. */
const SilenceMs = 45_000
/** Rows kept on the page; older ones are dropped (their verdicts are still counted). */
const MaxLiveRows = 500

type LiveState = "connecting" | "connected" | "reconnecting" | "stopped"

interface Following {
  readonly stop: (why: string, problem?: HTMLElement) => void
}

/** The stream followed now, if any (the page's one piece of state besides its DOM). */
let following: Following | undefined

const liveButtons = (active: boolean) => {
  ;(byId("follow-live") as HTMLButtonElement).disabled = active
  ;(byId("stop-live") as HTMLButtonElement).disabled = !active
}

const liveView = (publicId: string) => {
  const state = el("span", { class: "live-state", id: "live-state", "data-state": "connecting", role: "status" }, "connecting")
  const summary = el("p", { class: "muted", id: "live-summary" }, "No event yet.")
  const problem = el("div", {})
  const events = el("ol", { class: "live-events", id: "live-events" })
  let verified = 0
  let rejected = 0
  let brokenAt: number | undefined
  const card = el("div", { class: "card" },
    el("div", { class: "card-head" }, el("h3", {}, `Following ${publicId}`), state),
    el("p", { class: "muted" },
      "From the start of the chain, then live. Each event is checked on arrival: its eventHash recomputed, its link to the ",
      "event before it, and its Ed25519 signature by a key at /api/v1/events/keys."),
    summary, problem, events)
  return {
    card,
    setState: (next: LiveState, detail?: string) => {
      state.dataset.state = next
      state.className = `live-state ${next}`
      state.textContent = detail === undefined ? next : `${next}: ${detail}`
    },
    setProblem: (box: HTMLElement | null) => (box === null ? problem.replaceChildren() : problem.replaceChildren(box)),
    add: (arrival: Arrival) => {
      const { report } = arrival
      const check = report.events[0]
      const record = loose<EventPage["events"][number]>(arrival.event)
      if (report.ok) verified += 1
      else {
        rejected += 1
        brokenAt ??= report.sequence
      }
      const mark = report.ok
        ? el("span", { class: "mark ok" }, "✓ verified")
        : el("span", { class: "mark bad" }, `✗ rejected: ${report.reason}`)
      const row = el("li", {
        class: `live-event ${report.ok ? "ok" : "bad"}`,
        "data-sequence": text(record.sequence),
        "data-verdict": report.ok ? "verified" : "rejected",
        ...(report.ok ? {} : { "data-reason": report.reason })
      },
      el("div", { class: "live-line" },
        mark,
        el("span", { class: "seq" }, `#${text(record.sequence)}`),
        check?.malformed === null ? text(check.type) : el("span", { class: "bad-text" }, `malformed: ${check?.malformed ?? "?"}`),
        el("span", { class: "muted" }, ` at ${new Date().toLocaleTimeString()}`)),
      el("div", { class: "live-checks" },
        el("span", { "data-check": "hash" }, tick(check?.hash_ok === true, "hash")),
        el("span", { "data-check": "link" }, tick(check?.link_ok === true, "link")),
        el("span", { "data-check": "signature" }, tick(check?.signature_ok === true, check?.kid ? `signature kid ${check.kid}` : "signature")),
        arrival.refetchedKeys ? el("span", { class: "muted" }, "(keys fetched again for this kid)") : ""),
      report.ok ? "" : el("p", { class: "bad-text" }, report.detail))
      events.append(row)
      if (events.children.length > MaxLiveRows) events.firstElementChild?.remove()
      summary.textContent = `${verified} verified, ${rejected} rejected` +
        (brokenAt === undefined ? ": the chain is intact so far." : `: not intact since sequence ${brokenAt}.`)
      summary.className = rejected === 0 ? "muted" : "bad-text"
    }
  }
}

/**
 * Opens the stream and keeps it open: after a dropped connection, a server that stopped, a 429 or a 5xx,
 * it reconnects with Last-Event-ID (the last event received) after a short, growing wait. Any other
 * refusal (401, 403, 404, 400) stops it with the problem shown.
 */
const follow = (publicId: string, apiKey: string, view: ReturnType<typeof liveView>): Following => {
  let stopped = false
  let lastEventId = ""
  let previous: ChainHead = { sequence: 0, eventHash: null }
  let wait = ReconnectMs
  let connection: AbortController | undefined
  let timer: ReturnType<typeof setTimeout> | undefined
  const keys = keyring(async () => {
    const fetched = await serviceJwks()
    if (!fetched.ok) throw new Error("the service's keys (/api/v1/events/keys) could not be fetched")
    return fetched.jwks
  })

  const reconnect = (why: string, afterMs?: number) => {
    if (stopped) return
    const delay = Math.max(wait, afterMs ?? 0)
    wait = Math.min(wait * 2, ReconnectMaxMs)
    view.setState("reconnecting", `${why}; again in ${Math.round(delay / 1000)} s`)
    timer = setTimeout(() => void connect(), delay)
  }

  const connect = async (): Promise<void> => {
    const controller = new AbortController()
    connection = controller
    const headers: Record<string, string> = { accept: "text/event-stream", authorization: `Bearer ${apiKey}` }
    if (lastEventId !== "") headers["last-event-id"] = lastEventId
    let response: Response
    try {
      response = await fetch(`/api/v1/events/stream?public_id=${encodeURIComponent(publicId)}`, { headers, cache: "no-store", signal: controller.signal })
    } catch (error) {
      return reconnect(`the service did not answer (${messageOf(error)})`)
    }
    if (!response.ok || response.body === null) {
      const raw = await response.text().catch(() => "")
      let body: unknown
      try {
        body = JSON.parse(raw)
      } catch {
        body = undefined
      }
      const problem = problemView(response, body, raw)
      if (response.status === 429 || response.status >= 500) {
        view.setProblem(problem)
        const retryAfter = Number(response.headers.get("retry-after"))
        return reconnect(`refused with ${response.status}`, Number.isFinite(retryAfter) ? retryAfter * 1000 : 0)
      }
      return stop(`refused with ${response.status}`, problem)
    }
    if (!(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
      controller.abort()
      return stop("the answer is not text/event-stream", problemBox("Unexpected answer", `content-type ${response.headers.get("content-type") ?? "(none)"}`))
    }
    view.setProblem(null)
    view.setState("connected", lastEventId === "" ? "from the start" : `resumed after sequence ${lastEventId}`)
    wait = ReconnectMs
    const reader = response.body.getReader()
    const decoder = new TextDecoder()
    const parse = sseParser()
    let silence: ReturnType<typeof setTimeout> | undefined
    const listen = () => {
      clearTimeout(silence)
      silence = setTimeout(() => controller.abort(), SilenceMs)
    }
    let why = "the service closed the stream"
    try {
      listen()
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        listen()
        for (const message of parse(decoder.decode(value, { stream: true }))) {
          if (message.event !== StreamEventName) continue
          const arrival = await checkArrival(message.data, previous, publicId, keys)
          if (stopped) return
          previous = arrival.next
          lastEventId = message.id
          view.add(arrival)
        }
      }
    } catch (error) {
      why = controller.signal.aborted ? `nothing heard for ${SilenceMs / 1000} s` : `the connection failed (${messageOf(error)})`
    } finally {
      clearTimeout(silence)
    }
    if (!stopped) {
      controller.abort()
      reconnect(why)
    }
  }

  const stop = (why: string, problem?: HTMLElement) => {
    stopped = true
    clearTimeout(timer)
    connection?.abort()
    if (problem !== undefined) view.setProblem(problem)
    view.setState("stopped", why)
    liveButtons(false)
    if (following === handle) following = undefined
  }
  const handle: Following = { stop }
  void connect()
  return handle
}

const followLive = async () => {
  const target = byId("live-result")
  const publicId = inputById("public-id").value.trim()
  const apiKey = inputById("api-key").value.trim()
  following?.stop("replaced")
  if (publicId === "") return show(target, problemBox("No public id", "Type the determination's public id in section 1 first."))
  if (apiKey === "") return show(target, problemBox("No API key", "Following the chain needs an API key with scope trust:read."))
  const view = liveView(publicId)
  show(target, view.card)
  liveButtons(true)
  following = follow(publicId, apiKey, view)
}

// ---------------------------------------------------------------------------------------------------
// 3. A receipt's proof, in any of its four encodings.

const stepTitles: Record<EvidenceStep, string> = {
  format: "Format: the bytes are exactly this kind of evidence",
  digest: "Receipt digest: receipt_digest is SHA-256 of the RFC 8785 form of snapshot_payload",
  entry: "Log entry: the evidence's entry is this receipt's",
  leaf: "Merkle leaf: SHA-256(0x00 ‖ entry)",
  inclusion: "Inclusion: the path leads from the leaf to the checkpoint's root (RFC 9162)",
  checkpoint_signature: "Checkpoint signature: the log's signed note verifies",
  kid: "Key ID: the COSE kid names the trusted key",
  log_signature: "Log signature: the log key signed the Merkle root (COSE_Sign1, RFC 9942)",
  statement_signature: "Statement signature: the receipt key signed the statement (COSE_Sign1, RFC 9943)",
  claims: "Claims: iss is the log's origin, sub the receipt id, iat its creation time",
  witness_cosignatures: "Witnesses: a quorum of the pinned witnesses cosigned this checkpoint (C2SP cosignature/v1)",
  receipt_signature: "Receipt signature: Ed25519 over \"pv-receipt-v1\\n\" + receipt_digest"
}

const kindNames: Record<EvidenceKind, string> = {
  bundle: "Bundle",
  "tlog-proof": "tlog-proof",
  "cose-receipt": "COSE Receipt",
  "transparent-statement": "Transparent Statement"
}

/** The keys to pin when the reader chose this service's: the event/receipt JWKS and the log's note key. */
const servicePins = async (): Promise<
  { readonly ok: true; readonly receiptKeys: { keys: ReadonlyArray<unknown> }; readonly verifierKey: string | undefined; readonly note: string } | Problem
> => {
  const [jwks, logKey] = await Promise.all([serviceJwks(), getJson("/api/v1/log/key")])
  if (!jwks.ok) return jwks
  const receiptKeys = { keys: arrayOf(loose<EventJwks>(jwks.jwks).keys) }
  const verifierKey = logKey.ok ? loose<typeof LogKeyInfo.Type>(logKey.body).verifier_key : undefined
  if (typeof verifierKey === "string") {
    return { ok: true, receiptKeys, verifierKey, note: "pinned to this service's /api/v1/events/keys and /api/v1/log/key" }
  }
  return {
    ok: true,
    receiptKeys,
    verifierKey: undefined,
    note: "receipt keys pinned to this service's /api/v1/events/keys; this service publishes no log key, so the checkpoint was checked with the bundle's own verifier_key"
  }
}

type Pins = { readonly ok: true; readonly options: EvidenceVerifyOptions; readonly trusted: ReadonlyArray<Node | string>; readonly note: string }

const kidsOf = (jwks: unknown) =>
  arrayOf(loose<EventJwks>(jwks).keys).map((key) => text(loose<EventJwks["keys"][number]>(key).kid)).join(", ") || "(none)"

/** What the reader chose to trust: this service's keys (fetched, and shown), the keys they pasted, or none (the bundle's own). */
const chosenPins = async (kind: EvidenceKind): Promise<Pins | Problem> => {
  const choice = document.querySelector<HTMLInputElement>("input[name=bundle-keys]:checked")?.value
  if (choice === "bundle") {
    return {
      ok: true,
      options: {},
      trusted: [],
      note: kind === "bundle"
        ? "the bundle's own verifier_key and receipt_key (not pinned): this proves only that the bundle agrees with itself"
        : `none: a ${kindNames[kind]} carries no keys, so its signatures cannot be checked without pinning some`
    }
  }
  if (choice === "pasted") {
    const verifierKey = inputById("pin-log-key").value.trim()
    const jwksText = inputById("pin-jwks").value.trim()
    let receiptKeys: unknown
    try {
      receiptKeys = jwksText === "" ? undefined : JSON.parse(jwksText)
    } catch (error) {
      return { ok: false, problem: problemBox("The pasted JWKS is not JSON", messageOf(error)) }
    }
    if (receiptKeys !== undefined && !Array.isArray(loose<EventJwks>(receiptKeys).keys)) {
      return { ok: false, problem: problemBox("Not a JWKS", "The pasted receipt keys are not { \"keys\": [ … ] }, as GET /api/v1/events/keys returns.") }
    }
    return {
      ok: true,
      options: {
        ...(verifierKey === "" ? {} : { verifierKey }),
        ...(receiptKeys === undefined ? {} : { receiptKeys: receiptKeys as { keys: ReadonlyArray<unknown> } })
      },
      trusted: [
        el("li", { "data-trusted": "log-key" }, "log key (pasted): ", verifierKey === "" ? "none" : mono(verifierKey)),
        el("li", { "data-trusted": "receipt-keys" }, "receipt keys (pasted): ", receiptKeys === undefined ? "none" : `kid ${kidsOf(receiptKeys)}`)
      ],
      note: "pinned to the keys you pasted"
    }
  }
  const pins = await servicePins()
  if (!pins.ok) return pins
  return {
    ok: true,
    options: { receiptKeys: pins.receiptKeys, ...(pins.verifierKey === undefined ? {} : { verifierKey: pins.verifierKey }) },
    trusted: [
      el("li", { "data-trusted": "log-key" }, "log key (GET /api/v1/log/key): ", pins.verifierKey === undefined ? "none published" : mono(pins.verifierKey)),
      el("li", { "data-trusted": "receipt-keys" }, `receipt keys (GET /api/v1/events/keys): kid ${kidsOf(pins.receiptKeys)}`)
    ],
    note: pins.note
  }
}

const evidenceView = (kind: EvidenceKind, verdict: Pick<EvidenceVerdict, "ok" | "steps" | "failed_step" | "not_checked">, note: string, trusted: ReadonlyArray<Node | string>) => {
  const failed = verdict.failed_step
  const head = verdict.ok
    ? el("p", { class: "verdict ok", "data-verdict": "ok", "data-kind": kind }, `${kindNames[kind]} verified: every step passed.`)
    : failed !== undefined
      ? el("p", { class: "verdict bad", "data-verdict": "failed", "data-kind": kind, "data-failed-step": failed },
        `Rejected at step “${failed}”: ${verdict.steps.find((s) => s.step === failed && s.checked && !s.ok)?.detail ?? ""}`)
      : el("p", { class: "verdict warn", "data-verdict": "incomplete", "data-kind": kind },
        `Not verified: ${verdict.not_checked.join(", ")} could not be checked (no key).`)
  return el("div", { class: "card" },
    el("p", { class: "muted", "data-evidence-kind": kind }, `Recognised as: ${kindNames[kind]}`),
    head,
    el("ol", { class: "steps" }, ...verdict.steps.map((step) =>
      el("li", { class: `step ${step.ok ? "ok" : step.checked ? "bad" : "skip"}`, "data-step": step.step, "data-ok": String(step.ok) },
        el("span", { class: "mark" }, step.ok ? "✓" : step.checked ? "✗" : "–"),
        el("div", {},
          el("p", { class: "step-title" }, mono(step.step), " ", stepTitles[step.step]),
          el("p", { class: "muted" }, step.detail))))),
    el("p", { class: "muted" }, `Keys: ${note}.`),
    trusted.length === 0 ? "" : el("ul", { class: "trusted muted" }, ...trusted))
}

const verifyPastedEvidence = async () => {
  const target = byId("bundle-result")
  const evidence = evidenceOfText(inputById("bundle-json").value)
  if (!evidence.ok) return show(target, problemBox(evidence.title, evidence.detail))
  // Witness keys are typed in, one per line: the page never takes them from the service it checks.
  const witnesses = inputById("witness-keys").value.split("\n").map((line) => line.trim()).filter((line) => line.length > 0)
  const quorumText = inputById("witness-quorum").value.trim()
  const quorum = quorumText === "" ? undefined : Number(quorumText)
  const policy = inputById("pin-policy").value
  const witnessPolicy = {
    ...(witnesses.length === 0 ? {} : { witnesses, ...(quorum === undefined ? {} : { quorum }) }),
    ...(policy.trim() === "" ? {} : { policy })
  }
  const receiptText = inputById("evidence-receipt").value.trim()
  let receipt: unknown
  try {
    receipt = receiptText === "" ? undefined : JSON.parse(receiptText)
  } catch (error) {
    return show(target, problemBox("The receipt is not JSON", messageOf(error)))
  }
  show(target, working(`Verifying the ${kindNames[evidence.kind]}…`))
  const pins = await chosenPins(evidence.kind)
  if (!pins.ok) return show(target, pins.problem)
  const trusted = policy.trim() === "" ? pins.trusted : [...pins.trusted, el("li", { "data-trusted": "policy" }, "witness policy: ", mono(policy.trim()))]
  const options = { ...pins.options, ...witnessPolicy }
  const verdict = evidence.kind === "bundle"
    ? await verifyReceiptBundle(evidence.bundle, options)
    : await verifyEvidence(evidence.input, { ...options, ...(receipt === undefined ? {} : { receipt }) })
  show(target, evidenceView(evidence.kind, verdict, pins.note, trusted))
}

/** A dropped or chosen file: shown in the paste box (binary as base64), then verified like a paste. */
const loadFile = async (file: File) => {
  const bytes = new Uint8Array(await file.arrayBuffer())
  const kind = evidenceKindOf(bytes)
  inputById("bundle-json").value = textOfFile(bytes)
  byId("evidence-loaded").textContent =
    `${file.name}: ${bytes.length} bytes, ${kind === undefined ? "not recognised" : `recognised as ${kindNames[kind]}`}${kind === "cose-receipt" || kind === "transparent-statement" ? " (shown above as base64)" : ""}.`
  await verifyPastedEvidence()
}

const useServicePolicy = async () => {
  const target = byId("bundle-result")
  let response: Response
  try {
    response = await fetch("/api/v1/log/policy", { headers: { accept: "text/plain" }, cache: "no-store" })
  } catch (error) {
    return show(target, problemBox("The service did not answer", messageOf(error)))
  }
  const raw = await response.text()
  if (!response.ok) {
    let body: unknown
    try {
      body = JSON.parse(raw)
    } catch {
      body = undefined
    }
    return show(target, problemView(response, body, raw))
  }
  inputById("pin-policy").value = raw
}

const dropTarget = () => {
  const zone = byId("evidence-drop")
  const form = byId("bundle-form")
  form.addEventListener("dragover", (event) => {
    event.preventDefault()
    zone.classList.add("over")
  })
  form.addEventListener("dragleave", () => zone.classList.remove("over"))
  form.addEventListener("drop", (event) => {
    event.preventDefault()
    zone.classList.remove("over")
    const file = event.dataTransfer?.files[0]
    // The picker no longer names what is shown.
    if (file !== undefined) (byId("evidence-file") as HTMLInputElement).value = ""
    if (file !== undefined) loadFile(file).catch((error: unknown) => show(byId("bundle-result"), problemBox("The page failed", messageOf(error))))
  })
  const picker = byId("evidence-file") as HTMLInputElement
  picker.addEventListener("change", () => {
    const file = picker.files?.[0]
    if (file !== undefined) loadFile(file).catch((error: unknown) => show(byId("bundle-result"), problemBox("The page failed", messageOf(error))))
  })
}

// ---------------------------------------------------------------------------------------------------
// Wiring.

const onSubmit = (formId: string, action: () => Promise<unknown>, resultId: string) =>
  byId(formId).addEventListener("submit", (event) => {
    event.preventDefault()
    action().catch((error: unknown) => show(byId(resultId), problemBox("The page failed", messageOf(error))))
  })

const start = () => {
  if (!cryptoAvailable()) byId("crypto-warning").hidden = false
  onSubmit("lookup-form", () => lookUp(inputById("public-id").value.trim()), "lookup-result")
  onSubmit("chain-fetch-form", verifyFetchedChain, "chain-result")
  onSubmit("chain-paste-form", verifyPastedChain, "chain-result")
  onSubmit("bundle-form", verifyPastedEvidence, "bundle-result")
  dropTarget()
  byId("fetch-policy").addEventListener("click", () => {
    useServicePolicy().catch((error: unknown) => show(byId("bundle-result"), problemBox("The page failed", messageOf(error))))
  })
  byId("follow-live").addEventListener("click", () => {
    followLive().catch((error: unknown) => show(byId("live-result"), problemBox("The page failed", messageOf(error))))
  })
  byId("stop-live").addEventListener("click", () => following?.stop("stopped by you"))
  // Forgetting the key ends the stream too: an open stream holds the key in its request.
  byId("forget-key").addEventListener("click", () => {
    inputById("api-key").value = ""
    following?.stop("the key was forgotten")
  })
  // Leaving the page forgets the key, even when the browser keeps the page in its back/forward cache.
  window.addEventListener("pagehide", () => {
    inputById("api-key").value = ""
    following?.stop("the page was left")
  })
  const initial = new URLSearchParams(location.search).get("id")
  if (initial !== null && initial.trim() !== "") {
    inputById("public-id").value = initial.trim()
    void lookUp(initial.trim())
  }
  document.body.dataset.ready = "true"
}

start()
