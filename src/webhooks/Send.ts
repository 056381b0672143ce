/**
 * One delivery attempt: a POST of the signed body to the subscriber's URL, and what came of it.
 *
 * - The address actually connected to is checked on the TCP socket's `connect`, before a byte of the
 *   request or of a TLS hello is written: names go through `guardedLookup`, but Node skips `lookup` for
 *   IP-literal hosts and a name may resolve differently now than when the subscription was written
 *   (DNS rebinding), so the socket's `remoteAddress` is what the rule is finally applied to.
 * - No agent: each attempt opens its own connection (`createConnection` below) and closes it after. A
 *   pooled keep-alive socket would outlive the attempt's timeout and abort handling, and attempts to one
 *   receiver are seconds to minutes apart, so reuse would rarely save a handshake anyway.
 * - Redirects are not followed: the target of a redirect never went through these checks, and the
 *   Standard Webhooks receiver answers the URL it registered.
 * - 2xx is delivered as soon as the status line is in: the receiver has accepted. The answer's body is
 *   read (at most `maxResponseBytes`, then the connection is dropped) only so the exchange ends cleanly;
 *   its content is not used, so a 2xx whose body is huge, slow or cut off still counts as delivered.
 * - The whole attempt (lookup, connect, request, status, body) is bounded by `timeoutMs`.
 * - A failure says whose it is (`scope`): the receiver's as a whole ("origin": it could not be reached,
 *   reset the connection, failed TLS, timed out, answered 5xx or 429, which is the receiver's own rate),
 *   or this URL's ("url": any other 4xx, a redirect, an address the SSRF rules refuse, a URL that cannot be
 *   sent to). Deliveries holds back a failing origin's other subscriptions, a failing URL's only its own.
 * - A failure's `Retry-After` is passed on as sent; webhooks/Signals.ts decides what it means.
 * - Never throws, and never logs: the headers carry the signature.
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http"
import { request as httpsRequest } from "node:https"
import { connect, isIP, type Socket } from "node:net"
import type { Duplex } from "node:stream"
import { connect as tlsConnect } from "node:tls"
import { guardedLookup, isRefused, RefusedAddressCode, refusedAddressError } from "./Address.js"

/** Whose failure an attempt's is: the receiver's (scheme, host, port) as a whole, or only this exact URL's. */
export type FailureScope = "origin" | "url"

export type AttemptOutcome =
  | { readonly kind: "delivered"; readonly status: number }
  | {
    readonly kind: "failed"
    readonly status?: number
    readonly error: string
    readonly scope: FailureScope
    /** The answer's `Retry-After`, as sent (webhooks/Signals.ts reads it). */
    readonly retryAfter?: string
    /** The attempt's time-out ended it before the receiver's status came. */
    readonly timedOut?: true
  }

export interface SendInput {
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: string
  readonly timeoutMs: number
  readonly maxResponseBytes: number
  readonly allowPrivate: boolean
  readonly signal?: AbortSignal
}

const seconds = (ms: number): string => `${Number((ms / 1000).toFixed(3))} s`

/** A status that is the receiver's as a whole: it is failing (5xx) or says it is over its own rate (429). */
export const isOriginStatus = (status: number): boolean => status >= 500 || status === 429

/** A connection-level error (refused, reset, DNS, TLS, time-out) is the origin's; a refused address is this URL's. */
const errorScope = (error: unknown): FailureScope =>
  (error as { code?: unknown } | null)?.code === RefusedAddressCode ? "url" : "origin"

const errorText = (error: unknown): string => {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown }
  const text = typeof message === "string" && message !== "" ? message : String(error)
  if (code === RefusedAddressCode) return text
  return typeof code === "string" && !text.includes(code) ? `${code}: ${text}` : text
}

export const sendWebhook = (input: SendInput): Promise<AttemptOutcome> =>
  new Promise<AttemptOutcome>((resolve) => {
    let settled = false
    let request: ClientRequest | undefined
    let response: IncomingMessage | undefined
    let timer: ReturnType<typeof setTimeout> | undefined = undefined
    let tcp: Socket | undefined

    const onAbort = () => finish({ kind: "failed", error: "aborted", scope: "origin" })
    const finish = (outcome: AttemptOutcome): void => {
      if (settled) return
      settled = true
      if (timer !== undefined) clearTimeout(timer)
      input.signal?.removeEventListener("abort", onAbort)
      response?.destroy()
      request?.destroy()
      tcp?.destroy()
      resolve(outcome)
    }

    if (input.signal?.aborted === true) return finish({ kind: "failed", error: "aborted", scope: "origin" })

    let url: URL
    try {
      url = new URL(input.url)
    } catch {
      return finish({ kind: "failed", error: "invalid URL", scope: "url" })
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") {
      return finish({ kind: "failed", error: `unsupported scheme ${url.protocol}`, scope: "url" })
    }

    // What the outcome is once the status is known; the body only decides when the attempt ends.
    let verdict: AttemptOutcome | undefined
    const afterStatus = (status: number, retryAfter: string | undefined): AttemptOutcome =>
      status >= 200 && status < 300
        ? { kind: "delivered", status }
        : status >= 300 && status < 400
          ? { kind: "failed", status, error: `redirect ${status} not followed`, scope: "url" }
          : {
            kind: "failed",
            status,
            error: `HTTP ${status}`,
            scope: isOriginStatus(status) ? "origin" : "url",
            ...(retryAfter === undefined ? {} : { retryAfter })
          }

    timer = setTimeout(
      () => finish(verdict ?? { kind: "failed", error: `timed out after ${seconds(input.timeoutMs)}`, scope: "origin", timedOut: true }),
      input.timeoutMs
    )
    input.signal?.addEventListener("abort", onAbort, { once: true })

    const https = url.protocol === "https:"
    const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
    const port = url.port === "" ? (https ? 443 : 80) : Number(url.port)

    // The connection is made here rather than by an agent so that the address check runs on the TCP
    // socket's `connect`, before anything is written to it: with Node's https agent the TLS hello (SNI
    // included) would already be on its way when a `connect` listener on the request's socket runs.
    const createConnection = (_options: unknown, oncreate: (error: Error | null, socket: Duplex) => void): undefined => {
      const raw = connect({ host, port, lookup: guardedLookup(input.allowPrivate) })
      tcp = raw
      const failed = (error: Error) => oncreate(error, raw)
      raw.once("error", failed)
      raw.once("connect", () => {
        raw.off("error", failed)
        const address = raw.remoteAddress
        if (address === undefined || isRefused(address, input.allowPrivate)) {
          raw.destroy()
          return oncreate(refusedAddressError(host, address ?? "(unknown)"), raw)
        }
        if (!https) return oncreate(null, raw)
        // Certificates are verified (rejectUnauthorized defaults to true) against the URL's host; an IP
        // literal is not a valid SNI name, so it is sent only for names.
        oncreate(null, tlsConnect(isIP(host) === 0 ? { socket: raw, host, servername: host } : { socket: raw, host }))
      })
      return undefined
    }

    try {
      const send = https ? httpsRequest : httpRequest
      request = send(url, {
        method: "POST",
        createConnection,
        headers: { ...input.headers, "content-length": String(Buffer.byteLength(input.body)) }
      })
    } catch (error) {
      return finish({ kind: "failed", error: errorText(error), scope: errorScope(error) })
    }

    request.on("error", (error) => finish(verdict ?? { kind: "failed", error: errorText(error), scope: errorScope(error) }))
    request.on("response", (res) => {
      response = res
      verdict = afterStatus(res.statusCode ?? 0, res.headers["retry-after"])
      let received = 0
      const enough = () => finish(verdict!)
      if (input.maxResponseBytes <= 0) return enough()
      res.on("data", (chunk: Buffer) => {
        received += chunk.length
        if (received >= input.maxResponseBytes) enough()
      })
      res.on("end", enough)
      res.on("error", enough)
      res.on("close", enough)
    })
    request.end(input.body)
  })
