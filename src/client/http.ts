/**
 * A typed client for the REST surface, derived from the service's own HttpApi definition (`app/Api.ts`):
 * paths, parameters, success schemas and error classes all come from that one definition, so a change
 * to an endpoint changes this client's types with it.
 *
 * - `makeTrustHttpClient(options)`: the Effect client (`HttpApiClient.makeWith`), one method per endpoint,
 *   grouped as in the definition (`trust.machine`, `receipts.create`, `events.list`, …). Needs an
 *   `HttpClient` (e.g. `FetchHttpClient.layer` from `effect/http`).
 * - `makeTrustClient(options)`: the same client behind plain async functions, for code that does not use
 *   Effect; a failure rejects with the error value itself.
 *
 * Every `application/problem+json` answer fails with the service's own problem class
 * (`DeterminationNotFound`, `InsufficientScope`, `RateLimited`, …; `_tag` names it, `detail` and `errors`
 * carry the document's), whichever endpoint sent it. Anything else that is not a declared success fails
 * with the platform's `HttpClientError`, and a success body that does not match its schema with a
 * `SchemaError`. (The problems are mapped here, by status and code as `domain/Problem.ts` declares them on
 * each class, rather than by the endpoints' error schemas: every class encodes to the same RFC 9457
 * document, so a schema cannot tell two classes of one status apart, and the server may answer any
 * endpoint with an undeclared 429 or 503.)
 *
 * This module loads the API definition and the domain only, never the server's modules.
 */
import { Cause, Duration, Effect, Exit, Option, Redacted, Schedule } from "effect"
import { FetchHttpClient, HttpClient, HttpClientError, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { Api } from "../app/Api.js"
import { FieldError, problemClasses, type ProblemError } from "../domain/Problem.js"
import type { RelianceRequest } from "../domain/Receipt.js"

export interface TrustClientOptions {
  /** Where the service is, e.g. `http://127.0.0.1:8080` (no `/api/v1`: the paths carry it). */
  readonly baseUrl: string | URL
  /**
   * Sent as `Authorization: Bearer …` on every request: a `pv_live_` API key, or the operator token for
   * the operator endpoints. Leave it out for the open ones (`/human`, `/events/keys`, `/log/…`, health).
   */
  readonly apiKey?: string | Redacted.Redacted<string> | undefined
}

type ProblemClass = typeof problemClasses[number]

/** The class of each `status code` pair: as the classes declare them (two classes never share a pair). */
const problemClassByKey: ReadonlyMap<string, ProblemClass> = new Map(problemClasses.map((c) => [`${c.status} ${c.code}`, c]))

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The document's `errors`, when it is an array of `{ pointer, detail }` strings; anything else is left out. */
const fieldErrorsOf = (errors: unknown): ReadonlyArray<FieldError> | undefined =>
  Array.isArray(errors) && errors.every((e) => isRecord(e) && typeof e.pointer === "string" && typeof e.detail === "string")
    ? errors.map((e: { pointer: string; detail: string }) => new FieldError({ pointer: e.pointer, detail: e.detail }))
    : undefined

/**
 * The problem class a problem document names (by `status` and `code`, as the classes declare them), or
 * none for a document this version does not know. `retry_after` comes from the Retry-After header (1 when
 * absent), `scope` from the detail ("… scope <name>.").
 */
export const problemFromDocument = (document: unknown, headers: Readonly<Record<string, string>> = {}): Option.Option<ProblemError> => {
  if (!isRecord(document) || typeof document.code !== "string" || typeof document.status !== "number") return Option.none()
  const Problem = problemClassByKey.get(`${document.status} ${document.code}`)
  if (Problem === undefined) return Option.none()
  const detail = typeof document.detail === "string" ? document.detail : ""
  const errors = fieldErrorsOf(document.errors)
  const retryAfter = Number(headers["retry-after"] ?? Number.NaN)
  const scope = /\bscope ([\w:.-]+?)\.?$/.exec(detail)?.[1] ?? ""
  // Extra members only some classes read (retry_after, scope); the others ignore them.
  const input = {
    detail,
    ...(errors === undefined ? {} : { errors }),
    ...(typeof document.instance === "string" ? { instance: document.instance } : {}),
    retry_after: Number.isFinite(retryAfter) ? retryAfter : 1,
    scope
  }
  return Option.some(new Problem(input) as ProblemError)
}

const isProblemResponse = (response: HttpClientResponse.HttpClientResponse) =>
  response.status >= 400 && /^application\/problem\+json\b/i.test(response.headers["content-type"] ?? "")

/** Turns every problem+json answer into its problem class, before the endpoint's decoder sees it. */
const failOnProblem = (
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<HttpClientResponse.HttpClientResponse, ProblemError | HttpClientError.HttpClientError> =>
  isProblemResponse(response)
    ? Effect.flatMap(response.json, (document) =>
      Option.match(problemFromDocument(document, response.headers), {
        onSome: (problem) => Effect.fail<ProblemError | HttpClientError.HttpClientError>(problem),
        onNone: () =>
          Effect.fail(new HttpClientError.HttpClientError({
            reason: new HttpClientError.StatusCodeError({
              request: response.request,
              response,
              description: `unrecognised problem document (status ${response.status})`
            })
          }))
      }))
    : Effect.succeed(response)

/**
 * The Effect client: `HttpApiClient` over the service's `Api`, with the key as bearer token. Its type is
 * inferred, so the emitted declarations spell it out and do not reach the server's modules.
 */
export const makeTrustHttpClient = (options: TrustClientOptions) =>
  Effect.gen(function*() {
    const base = yield* HttpClient.HttpClient
    const apiKey = options.apiKey
    const httpClient = base.pipe(
      apiKey === undefined ? (client) => client : HttpClient.mapRequest(HttpClientRequest.bearerToken(apiKey)),
      HttpClient.transformResponse(Effect.flatMap(failOnProblem))
    )
    return yield* HttpApiClient.makeWith(Api, { httpClient, baseUrl: options.baseUrl })
  })

/**
 * The derived client: one method per endpoint of the definition, grouped as there (`trust.machine`,
 * `receipts.create`, …), each failing with its declared errors, any other problem class, `HttpClientError`
 * or `SchemaError`.
 */
export type TrustHttpClient = Effect.Success<ReturnType<typeof makeTrustHttpClient>>

/** A failure's own error (a problem class, `HttpClientError`, `SchemaError`), not a wrapper. */
const runPromise = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit) => {
    if (Exit.isSuccess(exit)) return exit.value
    throw Option.getOrElse(Cause.findErrorOption(exit.cause), () => Cause.squash(exit.cause))
  })

/**
 * The 7 caller fields of a receipt or an actionability evaluation, as sent (plain strings; the server
 * checks them and derives every decision field).
 */
export type RelianceRequestInput = typeof RelianceRequest.Encoded

export interface ProofOptions {
  /**
   * How long to keep asking while the answer is 404 `not-yet-logged` (a receipt is normally in a
   * published checkpoint within a second). Default 0: one request.
   */
  readonly waitMs?: number
}

export interface EventsQuery {
  readonly public_id: string
  readonly after?: number
  readonly limit?: number
}

/** A page of a list that goes newest first or oldest first: its size, and the cursor (`next_after`) of the page before. */
export interface PageQuery {
  readonly after?: string
  readonly limit?: number
}

/** What a method of the derived client succeeds with: the decoded body (its default `decoded-only` mode). */
export type SuccessOf<Method> = Method extends (request: infer _Request) => Effect.Effect<infer A, infer _E, infer _R>
  ? Exclude<A, HttpClientResponse.HttpClientResponse | readonly [unknown, HttpClientResponse.HttpClientResponse]>
  : never

type Endpoint<Group extends keyof TrustHttpClient, Name extends keyof TrustHttpClient[Group]> = SuccessOf<TrustHttpClient[Group][Name]>

/** GET /policy: the policy document as shipped plus its digest (the type the derived client decodes). */
export type PolicyView = Endpoint<"receipts", "policy">

/**
 * The main operations as async functions over the derived client, typed by it. A failure rejects with
 * the error value itself: a problem class, `HttpClientError` or `SchemaError`.
 */
export interface TrustClient {
  /** The derived Effect client, for every other endpoint. */
  readonly api: TrustHttpClient
  /** `GET /api/v1/trust/{publicId}/machine` (key with `trust:read`). */
  readonly machineTrust: (publicId: string) => Promise<Endpoint<"trust", "machine">>
  /** `GET /api/v1/trust/{publicId}/human` (no key): the same document. */
  readonly humanTrust: (publicId: string) => Promise<Endpoint<"trust", "human">>
  /** `POST /api/v1/reliance-receipts` (`receipt:write`): 201 new, or 200 with `idempotent: true`. */
  readonly createReceipt: (request: RelianceRequestInput) => Promise<Endpoint<"receipts", "create">>
  /** `GET /api/v1/reliance-receipts/{receiptId}` (`receipt:read`). */
  readonly getReceipt: (receiptId: string) => Promise<Endpoint<"receipts", "get">>
  /** `GET /api/v1/reliance-receipts/{receiptId}/proof` (`receipt:read`); check it with `verifyReceiptBundle`. */
  readonly receiptProof: (receiptId: string, options?: ProofOptions) => Promise<Endpoint<"receipts", "proof">>
  /** `GET /api/v1/events?public_id=&after=&limit=` (`trust:read`): one page; follow `next_after` until null. */
  readonly events: (query: EventsQuery) => Promise<Endpoint<"events", "list">>
  /** `GET /api/v1/events/keys` (no key): the JWKS for `verifyEventChain` and receipt signatures. */
  readonly eventKeys: () => Promise<Endpoint<"events", "keys">>
  /** `GET /api/v1/policy` (any key). */
  readonly policy: () => Promise<Endpoint<"receipts", "policy">>
  /** `POST /api/v1/actionability` (`actionability:read`): the verdicts a receipt would record; nothing stored. */
  readonly evaluateActionability: (request: RelianceRequestInput) => Promise<Endpoint<"receipts", "evaluate">>
  /** `GET /log/key` (no key): the log's verifier key, to pin. */
  readonly logKey: () => Promise<Endpoint<"log", "key">>
  /**
   * `POST /api/v1/subscriptions` (`subscription:write`): a pull subscription, or with `webhook_url` a webhook
   * one whose `webhook_secret` is in this answer only (the first time); check deliveries with `verifyWebhook`.
   */
  readonly subscribe: (request: { readonly public_id: string; readonly webhook_url?: string }) => Promise<Endpoint<"subscriptions", "create">>
  /** `GET /api/v1/subscriptions/{id}` (`subscription:write`): with delivered_through, pending, attempts, last_error, … */
  readonly subscription: (subscriptionId: string) => Promise<Endpoint<"subscriptions", "get">>
  /** `GET /api/v1/subscriptions/{id}/attempts?limit=&after=` (`subscription:write`): one page, newest first; follow `next_after`. */
  readonly attempts: (subscriptionId: string, page?: PageQuery) => Promise<Endpoint<"subscriptions", "attempts">>
  /** `POST /api/v1/subscriptions/{id}/redeliver` (`subscription:write`): the events from `fromSequence` are sent again, in order. */
  readonly redeliver: (subscriptionId: string, fromSequence: number) => Promise<Endpoint<"subscriptions", "redeliver">>
}

/** `TrustClient` over `fetch`: the derived client, built once, behind async functions. */
export const makeTrustClient = (options: TrustClientOptions): TrustClient => {
  const api = Effect.runSync(makeTrustHttpClient(options).pipe(Effect.provide(FetchHttpClient.layer)))
  return {
    api,
    machineTrust: (publicId) => runPromise(api.trust.machine({ params: { publicId }, headers: {} })),
    humanTrust: (publicId) => runPromise(api.trust.human({ params: { publicId }, headers: {} })),
    createReceipt: (request) => runPromise(api.receipts.create({ payload: request })),
    getReceipt: (receiptId) => runPromise(api.receipts.get({ params: { receiptId } })),
    receiptProof: (receiptId, proofOptions = {}) => {
      const waitMs = proofOptions.waitMs ?? 0
      const once = api.receipts.proof({ params: { receiptId } })
      return runPromise(waitMs <= 0 ? once : once.pipe(Effect.retry({
        while: (error) => error._tag === "NotYetLogged",
        schedule: Schedule.spaced(Duration.millis(200)).pipe(Schedule.upTo({ duration: Duration.millis(waitMs) }))
      })))
    },
    events: (query) =>
      runPromise(api.events.list({
        query: {
          public_id: query.public_id,
          ...(query.after === undefined ? {} : { after: query.after }),
          ...(query.limit === undefined ? {} : { limit: query.limit })
        }
      })),
    eventKeys: () => runPromise(api.events.keys()),
    policy: () => runPromise(api.receipts.policy()),
    evaluateActionability: (request) => runPromise(api.receipts.evaluate({ payload: request })),
    logKey: () => runPromise(api.log.key()),
    subscribe: (request) => runPromise(api.subscriptions.create({ payload: request })),
    subscription: (subscriptionId) => runPromise(api.subscriptions.get({ params: { subscriptionId } })),
    attempts: (subscriptionId, page = {}) =>
      runPromise(api.subscriptions.attempts({
        params: { subscriptionId },
        query: { ...(page.after === undefined ? {} : { after: page.after }), ...(page.limit === undefined ? {} : { limit: page.limit }) }
      })),
    redeliver: (subscriptionId, fromSequence) =>
      runPromise(api.subscriptions.redeliver({ params: { subscriptionId }, payload: { from_sequence: fromSequence } }))
  }
}
