import { afterAll, describe, expect, it } from "vitest"
import { expectProblem } from "../support/http.js"
import { Deployment, freePort, sleep } from "../support/childServer.js"
import { databaseKinds } from "./service.js"
import { answer, call, describeOutcome, type Outcome } from "./wire.js"

/**
 * docs/API.md §13, "Start": no accepted connection goes unanswered. The port is opened only when
 * requests can be served, or requests that arrive earlier get 503 `unavailable` at once. /healthz = the
 * process is serving; /readyz = database reachable, migrations applied, not draining.
 */
describe.each(databaseKinds)("start window (%s)", (kind) => {
  let deployment: Deployment | undefined
  afterAll(() => deployment?.dispose())

  it("from spawn until ready, every /readyz attempt is refused or fully answered (503, then 200); none hangs", async () => {
    // A new installation (initdb, every migration): the longest window.
    deployment = await Deployment.create(kind, { fresh: true })
    // PORT=0 would be unknown until the banner: choose the port first so polling starts at spawn.
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    // Embedded: with the demo data, as `npm start` runs by default (loaded into the empty database during
    // start, which widens the window between opening the port and serving).
    const child = deployment.spawn({ PORT: String(port), ...(kind === "embedded" ? { PV_DEMO_DATA: "true" } : {}) })

    const attempts: Array<{ startedMs: number; endedMs: number; outcome: Outcome }> = []
    const inFlight = new Set<Promise<void>>()
    let firstReadyAt: number | undefined
    let extraAfterReady = 10
    const deadline = performance.now() + 90_000
    // A new attempt every ~20 ms regardless of earlier ones, each with a 1 s client time-out.
    while (performance.now() < deadline && !child.exited && extraAfterReady > 0) {
      if (firstReadyAt !== undefined) extraAfterReady--
      const startedMs = performance.now() - child.spawnedAt
      const attempt = call(base, "GET", "/readyz", { timeoutMs: 1_000 }).then((outcome) => {
        const endedMs = performance.now() - child.spawnedAt
        attempts.push({ startedMs, endedMs, outcome })
        if (outcome.kind === "answer" && outcome.answer.status === 200) firstReadyAt ??= endedMs
      })
      inFlight.add(attempt)
      void attempt.finally(() => inFlight.delete(attempt))
      await sleep(20)
    }
    await Promise.all(inFlight)
    attempts.sort((a, b) => a.startedMs - b.startedMs)

    const tally = new Map<string, number>()
    for (const { outcome } of attempts) {
      const label = outcome.kind === "answer" ? String(outcome.answer.status) : outcome.kind
      tally.set(label, (tally.get(label) ?? 0) + 1)
    }
    console.log(`start window (${kind}): ${JSON.stringify(Object.fromEntries(tally))}; first 200 at ${Math.round(firstReadyAt ?? -1)} ms after spawn`)

    expect(child.exited, child.output).toBeUndefined()
    expect(firstReadyAt, `never ready:\n${child.output}`).toBeDefined()

    const bad = attempts.filter(({ outcome }) =>
      outcome.kind === "timeout" || outcome.kind === "closed" ||
      (outcome.kind === "answer" && outcome.answer.status !== 200 && outcome.answer.status !== 503)
    )
    expect(
      bad.map(({ startedMs, outcome }) => `attempt at +${Math.round(startedMs)} ms: ${describeOutcome(outcome)}`),
      "an accepted connection was left unanswered (hang or close) or answered other than 503/200"
    ).toEqual([])

    // Early answers are the documented 503 `unavailable` (docs/API.md §5.2), and readiness never goes back once reached.
    for (const { outcome } of attempts) {
      if (outcome.kind === "answer" && outcome.answer.status === 503) expectProblem(outcome.answer, 503, "unavailable")
    }
    const regressions = attempts.filter(({ startedMs, outcome }) =>
      startedMs > firstReadyAt! && !(outcome.kind === "answer" && outcome.answer.status === 200))
    expect(regressions.map(({ outcome }) => describeOutcome(outcome))).toEqual([])

    const banner = await child.waitForBanner(30_000)
    expect(banner).toBe(base)
    expect((await answer(base, "GET", "/healthz")).status).toBe(200)
    expect((await answer(base, "GET", "/readyz")).status).toBe(200)
  })
})
