import { type ChildProcess, execFile, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

/**
 * The compiled JavaScript of a TypeScript entry of this repository (`src/main.ts` → `dist/src/main.js`), what
 * `npm start` and `pv` run. The projects whose tests start such processes build dist/ once per run first
 * (support/buildDist.ts, named in vitest.config.ts), so no child compiles the sources again.
 */
export const compiledEntry = (entry: string): string => {
  const compiled = join(root, "dist", entry.replace(/\.ts$/, ".js"))
  if (!existsSync(compiled)) throw new Error(`${compiled} is missing: run the tests through vitest (its global setup builds dist/) or \`npm run build\``)
  return compiled
}

/** What a finished process printed, and its exit code (null when a signal ended it). */
export interface Ran {
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * A process run to its end, as spawnSync would, without blocking this process: a test server in the same worker must
 * go on answering meanwhile (its database probe fails after 750 ms without a turn of the event loop).
 */
export const runProcess = (command: string, args: ReadonlyArray<string>, options: { readonly env: NodeJS.ProcessEnv; readonly timeoutMs?: number }): Promise<Ran> =>
  new Promise((resolve) =>
    execFile(command, args, { cwd: root, env: options.env, encoding: "utf8", timeout: options.timeoutMs ?? 0, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const status = error === null ? 0 : typeof error.code === "number" ? error.code : null
      resolve({ status, stdout, stderr: error !== null && status === null ? `${stderr}${error.message}` : stderr })
    }))

/** A compiled entry of this repository (`compiledEntry`) run to its end with exactly `env` (`runProcess`). */
export const runEntry = ([entry, ...args]: ReadonlyArray<string>, env: Record<string, string>): Promise<Ran> =>
  runProcess(process.execPath, [compiledEntry(entry!), ...args], { env })

/** A TypeScript entry of this repository run as its own OS process, its output collected. */
export interface Spawned {
  readonly child: ChildProcess
  readonly output: () => string
  /** The first match of `pattern` in the output so far or to come; rejects, with the output, when the process exits first or after `timeoutMs`. */
  readonly waitFor: (pattern: RegExp, timeoutMs?: number) => Promise<RegExpExecArray>
  /** Resolves when the process has exited. */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code (at once if it already exited). */
  readonly stop: (graceMs?: number) => Promise<number | null>
}

/**
 * The one way the tests start a process of the service (`src/main.ts`, `src/cli/main.ts …`): its compiled
 * entry (`compiledEntry`), from the repository's root, with exactly `env` (callers pass `childEnvironment(…)`
 * to start from the test keys and nothing of this process's environment).
 */
export const spawnEntry = ([entry, ...args]: ReadonlyArray<string>, env: Record<string, string>): Spawned => {
  const child = spawn(process.execPath, [compiledEntry(entry!), ...args], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  const listeners = new Set<() => void>()
  const onData = (chunk: Buffer) => {
    output += chunk.toString()
    for (const listener of listeners) listener()
  }
  child.stdout!.on("data", onData)
  child.stderr!.on("data", onData)
  let done = false
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => {
      done = true
      resolve({ code, signal })
    }))
  const waitFor = (pattern: RegExp, timeoutMs = 90_000) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(output)
        if (match === null) return false
        listeners.delete(check)
        clearTimeout(timer)
        resolve(match)
        return true
      }
      const timer = setTimeout(() => {
        listeners.delete(check)
        reject(new Error(`no ${pattern} within ${timeoutMs} ms:\n${output}`))
      }, timeoutMs)
      if (check()) return
      listeners.add(check)
      void exited.then(({ code, signal }) => {
        if (!listeners.delete(check)) return
        clearTimeout(timer)
        // Output written just before the exit may still complete the match.
        if (pattern.exec(output) !== null) return resolve(pattern.exec(output)!)
        reject(new Error(`the process exited (${code ?? signal}) before ${pattern}:\n${output}`))
      })
    })
  const stop = (graceMs = 10_000) => {
    if (!done) {
      child.kill("SIGTERM")
      setTimeout(() => child.kill("SIGKILL"), graceMs).unref()
    }
    return exited.then(({ code }) => code)
  }
  return { child, output: () => output, waitFor, exited, stop }
}
