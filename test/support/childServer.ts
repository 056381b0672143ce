import { type ChildProcess, spawn } from "node:child_process"
import { generateKeyPairSync } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { childEnvironment } from "./childEnv.js"
import { createScratchDatabase } from "./databases.js"
import { copyMigratedPglite, createMigratedDatabase } from "./templates.js"

/**
 * The COMPILED service (`dist/src/main.js`, what `npm start` runs after its build) as a child process:
 * spawn it with an environment, await its banner, signal it, kill it, and start it again on the same
 * data directory or database. The fault-injection suite (test/faults) builds `dist/` once first.
 */

export const projectRoot = fileURLToPath(new URL("../..", import.meta.url))
/**
 * `PV_FAULTS_MAIN=/path/to/dist/src/main.js` runs the suite against a build made elsewhere (another
 * commit, say) and skips the build step; by default this checkout's own `dist/`.
 */
export const prebuiltMain = process.env.PV_FAULTS_MAIN
export const compiledMain = prebuiltMain === undefined ? join(projectRoot, "dist", "src", "main.js") : resolve(prebuiltMain)
/** The node flags of `npm start` (package.json's start script), which the child runs with. */
export const startNodeFlags: ReadonlyArray<string> = (JSON.parse(readFileSync(join(projectRoot, "package.json"), "utf8")).scripts.start as string)
  .split(" ").filter((word) => word.startsWith("--"))
export const childOperatorToken = "op_child_0123456789abcdefghijklmnopqrstuvwxyz"

/** An Ed25519 private key as PKCS#8 PEM, the format of PV_EVENT_SIGNING_KEY / PV_LOG_SIGNING_KEY. */
export const ed25519Pem = (): string =>
  generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()

/** A loopback port nothing listens on right now (the OS picks it; it is released before returning). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen({ port: 0, host: "127.0.0.1", exclusive: true }, () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export interface ChildExit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  /** performance.now() when the exit was observed. */
  readonly at: number
}

const bannerPattern = /pv trust service listening on (http:\/\/[\d.]+:(\d+))/

export class ChildServer {
  readonly process: ChildProcess
  /** performance.now() right after spawn. */
  readonly spawnedAt: number
  private out = ""
  private err = ""
  private exit: ChildExit | undefined
  private readonly exitWaiters: Array<(exit: ChildExit) => void> = []
  private readonly outputWaiters: Array<() => void> = []

  private constructor(env: Record<string, string>) {
    this.process = spawn(process.execPath, [...startNodeFlags, compiledMain], {
      cwd: projectRoot,
      env: childEnvironment({ HOST: "127.0.0.1", PORT: "0", PV_BANNER: "true", ...env }),
      stdio: ["ignore", "pipe", "pipe"]
    })
    this.spawnedAt = performance.now()
    this.process.stdout!.on("data", (chunk: Buffer) => {
      this.out += chunk.toString()
      this.notifyOutput()
    })
    this.process.stderr!.on("data", (chunk: Buffer) => {
      this.err += chunk.toString()
      this.notifyOutput()
    })
    // "close" (not "exit") so stdout/stderr are complete when waiters run.
    this.process.once("close", (code, signal) => {
      this.exit = { code, signal, stdout: this.out, stderr: this.err, at: performance.now() }
      for (const waiter of this.exitWaiters.splice(0)) waiter(this.exit)
      this.notifyOutput()
    })
  }

  /** Starts the process and returns at once (the banner is not awaited). */
  static spawn(env: Record<string, string>): ChildServer {
    return new ChildServer(env)
  }

  get pid(): number | undefined {
    return this.process.pid
  }

  get stdout(): string {
    return this.out
  }

  get stderr(): string {
    return this.err
  }

  /** Everything the process printed, for failure messages. */
  get output(): string {
    return `--- stdout ---\n${this.out}\n--- stderr ---\n${this.err}`
  }

  get exited(): ChildExit | undefined {
    return this.exit
  }

  private notifyOutput() {
    for (const waiter of this.outputWaiters.splice(0)) waiter()
  }

  /** The URL of the banner line once printed; rejects when the process exits first or after `timeoutMs`. */
  async waitForBanner(timeoutMs = 60_000): Promise<string> {
    const deadline = performance.now() + timeoutMs
    for (;;) {
      const match = bannerPattern.exec(this.out)
      if (match) return match[1]!
      if (this.exit) throw new Error(`the service exited (code ${this.exit.code}, signal ${this.exit.signal}) before its banner\n${this.output}`)
      const left = deadline - performance.now()
      if (left <= 0) throw new Error(`no banner within ${timeoutMs} ms\n${this.output}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250))
        this.outputWaiters.push(() => (clearTimeout(timer), resolve()))
      })
    }
  }

  signal(signal: NodeJS.Signals): void {
    if (!this.exit) this.process.kill(signal)
  }

  /** The exit, or a rejection carrying the output when the process is still running after `timeoutMs`. */
  waitForExit(timeoutMs = 30_000): Promise<ChildExit> {
    if (this.exit) return Promise.resolve(this.exit)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the service did not exit within ${timeoutMs} ms\n${this.output}`)), timeoutMs)
      this.exitWaiters.push((exit) => (clearTimeout(timer), resolve(exit)))
    })
  }

  /** SIGKILL, and the exit once the OS reports it. */
  kill9(): Promise<ChildExit> {
    this.signal("SIGKILL")
    return this.waitForExit(30_000)
  }
}

export type DeploymentKind = "embedded" | "postgres"

export interface DeploymentOptions {
  /** PostgreSQL URL to use instead of a fresh scratch database (e.g. one behind a TCP proxy). */
  readonly databaseUrl?: string
  /** Extra environment for every start. */
  readonly env?: Record<string, string>
  /**
   * Start as a new installation: an empty data directory (the first process runs initdb, then every
   * migration) or an empty scratch database (every migration). By default a deployment starts on a copy
   * of the migrated template (support/templates.ts), as the in-process test servers do: what the fault
   * tests exercise comes after the start, and a first embedded start without it takes ~3 s longer (initdb).
   * The start-window test (test/faults/start.test.ts) starts fresh, to cover the longest window.
   */
  readonly fresh?: boolean
}

/**
 * One deployment's durable state (a data directory, or a scratch PostgreSQL database, plus fixed
 * operator token and signing keys) that several successive processes run on: start, crash, start again.
 */
export class Deployment {
  readonly children: Array<ChildServer> = []

  private constructor(
    readonly kind: DeploymentKind,
    readonly env: Record<string, string>,
    readonly databaseUrl: string | undefined,
    private readonly cleanup: () => Promise<void>
  ) {}

  static async create(kind: DeploymentKind, options: DeploymentOptions = {}): Promise<Deployment> {
    const base: Record<string, string> = {
      PV_OPERATOR_TOKEN: childOperatorToken,
      PV_DEMO_DATA: "false",
      PV_BANNER: "true",
      // One loopback address drives all the traffic: per-address limits are not under test here.
      PV_HUMAN_RATE_LIMIT_PER_MINUTE: "1000000",
      PV_OPERATOR_RATE_LIMIT_PER_MINUTE: "1000000",
      PV_AUTH_FAILURE_LIMIT_PER_MINUTE: "1000000"
    }
    // A build made elsewhere (PV_FAULTS_MAIN) may have other migrations or another PGlite: it starts fresh.
    const fresh = options.fresh ?? prebuiltMain !== undefined
    if (kind === "embedded") {
      const dataDir = mkdtempSync(join(tmpdir(), "pv-faults-"))
      if (!fresh) await Effect.runPromise(copyMigratedPglite(dataDir))
      return new Deployment(kind, { ...base, PV_DATA_DIR: dataDir, ...options.env }, undefined, async () => {
        rmSync(dataDir, { recursive: true, force: true })
      })
    }
    const scratch = options.databaseUrl !== undefined ? undefined : fresh ? await createScratchDatabase() : await createMigratedDatabase()
    const databaseUrl = options.databaseUrl ?? scratch!.url
    // Fixed keys, so every restart signs with the same key and chains verify across restarts.
    const env = {
      ...base,
      DATABASE_URL: databaseUrl,
      PV_EVENT_SIGNING_KEY: ed25519Pem(),
      PV_LOG_SIGNING_KEY: ed25519Pem(),
      PV_WEBHOOK_SIGNING_KEY: ed25519Pem(),
      ...options.env
    }
    return new Deployment(kind, env, databaseUrl, async () => {
      await scratch?.drop()
    })
  }

  /** A new process on this deployment's state, not awaited. */
  spawn(env: Record<string, string> = {}): ChildServer {
    const child = ChildServer.spawn({ ...this.env, ...env })
    this.children.push(child)
    return child
  }

  /** A new process, once it printed its banner; returns it with its base URL. */
  async start(env: Record<string, string> = {}): Promise<{ child: ChildServer; baseUrl: string }> {
    const child = this.spawn(env)
    try {
      return { child, baseUrl: await child.waitForBanner() }
    } catch (error) {
      await child.kill9().catch(() => undefined)
      throw error
    }
  }

  /** Kills whatever still runs, then removes the data directory or drops the database. */
  async dispose(): Promise<void> {
    for (const child of this.children) {
      if (!child.exited) await child.kill9().catch(() => undefined)
    }
    await this.cleanup()
  }
}
