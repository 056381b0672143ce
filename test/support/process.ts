import { testSigningKeyPem } from "../../src/events/Signer.js"
import { testLogSigningKeyPem } from "../../src/log/LogKey.js"
import { testWebhookSigningKeyPem } from "../../src/webhooks/WebhookKey.js"
import { childEnvironment } from "./childEnv.js"
import { spawnEntry } from "./spawned.js"

export interface ServerProcess {
  readonly baseUrl: string
  readonly stop: () => Promise<void>
}

/**
 * Starts `src/main.ts` as a separate OS process (a second instance), and waits for its banner. Its
 * environment is `env` and the test keys only (support/childEnv.ts), not this process's.
 */
export const startServerProcess = async (env: Record<string, string>): Promise<ServerProcess> => {
  const server = spawnEntry(["src/main.ts"], childEnvironment({
    PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_EVENT_SIGNING_KEY: testSigningKeyPem(), PV_LOG_SIGNING_KEY: testLogSigningKeyPem(),
    PV_WEBHOOK_SIGNING_KEY: testWebhookSigningKeyPem(), ...env
  }))
  try {
    const [, baseUrl] = await server.waitFor(/listening on (http:\/\/[\d.]+:\d+)/)
    return { baseUrl: baseUrl!, stop: async () => void (await server.stop(5_000)) }
  } catch (error) {
    server.child.kill("SIGKILL")
    throw error
  }
}
