import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { testSigningKeyPem } from "../../src/events/Signer.js"
import { testLogSigningKeyPem } from "../../src/log/LogKey.js"
import { childEnvironment } from "./childEnv.js"

const root = fileURLToPath(new URL("../..", import.meta.url))

export interface ServerProcess {
  readonly baseUrl: string
  readonly stop: () => Promise<void>
}

/**
 * Starts `src/main.ts` as a separate OS process (a second instance), and waits for its banner. Its
 * environment is `env` and the test keys only (support/childEnv.ts), not this process's.
 */
export const startServerProcess = (env: Record<string, string>): Promise<ServerProcess> =>
  new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
      cwd: root,
      env: childEnvironment({ PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_EVENT_SIGNING_KEY: testSigningKeyPem(), PV_LOG_SIGNING_KEY: testLogSigningKeyPem(), ...env }),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`server process did not start:\n${output}`))
    }, 90_000)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(output)
      if (match) {
        clearTimeout(timer)
        resolve({
          baseUrl: match[1]!,
          stop: () =>
            new Promise<void>((done) => {
              child.once("exit", () => done())
              child.kill("SIGTERM")
              setTimeout(() => child.kill("SIGKILL"), 5_000).unref()
            })
        })
      }
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`server process exited (${code}):\n${output}`))
    })
  })
