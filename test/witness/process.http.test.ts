import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseCosignerKey } from "../../src/log/Cosignature.js"
import { testLogSigningKeyPem } from "../../src/log/LogKey.js"
import { childEnvironment } from "../support/childEnv.js"
import { spawnEntry } from "../support/spawned.js"
import { copyMigratedPglite, createMigratedDatabase } from "../support/templates.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { verifierKeyOfSigner } from "../../src/log/Note.js"
import { createPrivateKey } from "node:crypto"

/**
 * `pv witness serve` as its own OS process through the CLI (`src/cli/main.ts witness serve`): it
 * announces its key, answers over HTTP, keeps its generated key in the data directory (0600) across
 * restarts when embedded, refuses to start without PV_WITNESS_LOGS, and exits 0 on SIGTERM. Its databases are
 * copies of the migrated templates (support/templates.ts), as the in-process witnesses' are: a first start on an
 * empty directory (initdb in a child process, every migration) is test/http/defaults.http.test.ts's, and cost
 * this file ~5 CPU-s more.
 */

const logKey = verifierKeyOfSigner("localhost/pv-log", createPrivateKey(testLogSigningKeyPem()))
const dataDir = mkdtempSync(join(tmpdir(), "pv-witness-process-"))
beforeAll(() => Effect.runPromise(copyMigratedPglite(dataDir)))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

const run = (env: Record<string, string>) => {
  const witness = spawnEntry(["src/cli/main.ts", "witness", "serve"], childEnvironment({ PORT: "0", HOST: "127.0.0.1", ...env }))
  const listening = witness.waitFor(/listening on (http:\/\/[\d.]+:\d+); verifier key (\S+);/).then(([, url, key]) => ({ url: url!, key: key! }))
  // A run expected to fail never awaits this.
  listening.catch(() => undefined)
  return { child: witness.child, listening, exited: witness.exited.then(({ code }) => code), output: witness.output }
}

describe("pv witness serve (a child process)", () => {
  it("announces its key, answers, keeps a generated key (0600) across restarts, and exits 0 on SIGTERM", async () => {
    const env = { PV_DATA_DIR: dataDir, PV_WITNESS_NAME: "witness.test/proc", PV_WITNESS_LOGS: logKey }
    const first = run(env)
    const { url, key } = await first.listening
    expect(parseCosignerKey(key).ok).toBe(true)
    const served = await (await fetch(`${url}/witness/key`)).json()
    expect(served).toEqual({ name: "witness.test/proc", verifier_key: key })
    expect((await fetch(`${url}/healthz`)).status).toBe(200)
    expect((statSync(join(dataDir, "witness-signing-key.pem")).mode & 0o777).toString(8)).toBe("600")
    first.child.kill("SIGTERM")
    expect(await first.exited).toBe(0)
    const second = run(env)
    expect((await second.listening).key).toBe(key)
    second.child.kill("SIGTERM")
    expect(await second.exited).toBe(0)
  }, 180_000)

  it("refuses to start without PV_WITNESS_LOGS, and on PostgreSQL without PV_WITNESS_SIGNING_KEY, naming the variable", async () => {
    const noLogs = run({ PV_DATA_DIR: dataDir })
    expect(await noLogs.exited).not.toBe(0)
    expect(noLogs.output()).toContain("PV_WITNESS_LOGS")
    const scratch = await createMigratedDatabase()
    try {
      const noKey = run({ DATABASE_URL: scratch.url, PV_WITNESS_LOGS: logKey })
      expect(await noKey.exited).not.toBe(0)
      expect(noKey.output()).toContain("PV_WITNESS_SIGNING_KEY")
      const pem = privateKeyFromSeed(Buffer.alloc(32, 77)).export({ format: "pem", type: "pkcs8" }).toString()
      const withKey = run({ DATABASE_URL: scratch.url, PV_WITNESS_LOGS: logKey, PV_WITNESS_SIGNING_KEY: pem })
      await withKey.listening
      withKey.child.kill("SIGTERM")
      expect(await withKey.exited).toBe(0)
    } finally {
      await scratch.drop()
    }
  }, 180_000)
})
