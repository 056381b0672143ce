import { readFile } from "node:fs/promises"
import { parseArgs } from "node:util"
// Deep imports, here and in every module the offline commands load (test/architecture/folderGraph.test.ts): the
// barrels load what the CLI never needs (all of Effect; @effect/platform-node's Redis client).
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import { verifyEventsCommand } from "../events/VerifyCommand.js"
import { LogMonitorFailed, logMonitorCommand, MonitorExitCodes } from "./LogMonitor.js"
import { fail, print } from "./Output.js"
import { verifyReceiptCommand } from "./VerifyReceipt.js"

const usage = `pv — Trust Resolution and Reliance Receipt Service

Usage:
  pv serve [--workers N]                     start the HTTP service (N processes need DATABASE_URL)
  pv migrate                                 apply database migrations and exit
  pv keys create --tenant T --name N --scopes s1,s2 [--rate-limit N] [--daily-quota N] [--expires-at ISO]
  pv keys list [--tenant T]
  pv keys revoke KEY_ID
  pv import FILE.ndjson                      store determinations, one {"public_id", …PUT body} per line
  pv verify-events (--base-url URL --api-key KEY --public-id ID | --file FEED.json)
  pv verify-receipt FILE [--verifier-key KEY] [--jwks JWKS.json] [--receipt RECEIPT.json] [--witness VKEY]... [--quorum N]
                    [--policy FILE]      check a receipt's proof offline, step by step: a bundle, a
                                             .tlog-proof, a COSE receipt or a transparent statement
  pv log monitor --base-url URL --state FILE [--verifier-key KEY] [--witness [URL=]VKEY]... [--quorum N]
                 [--policy FILE] [--timeout SECONDS]
                                             check the log's latest checkpoint against the last one seen
                                             (pv log monitor --help: its exit codes)
  pv witness serve                           run a C2SP tlog-witness (PV_WITNESS_NAME, PV_WITNESS_LOGS,
                                             PV_WITNESS_SIGNING_KEY; PORT, HOST, PV_DATA_DIR or DATABASE_URL)

Environment: DATABASE_URL (PostgreSQL; unset = embedded PGlite in PV_DATA_DIR, default ./.pv-data),
PORT, HOST, PV_OPERATOR_TOKEN. The keys and import commands talk to the database directly.`

const monitorUsage = `pv log monitor --base-url URL --state FILE [options]

Fetches the log's latest checkpoint, checks its signature with the pinned key and its consistency with the
last checkpoint accepted (kept in FILE), and with witnesses their cosignatures. FILE is replaced only by a
checkpoint that passed.

Options:
  --verifier-key KEY     pin the log's note verifier key (else the policy's, else FILE's, else GET /log/key once)
  --witness [URL=]VKEY   a witness whose cosignature counts (repeatable; the same key twice counts once); with
                         its URL prefix it is also asked for the checkpoint it last cosigned
  --quorum N             how many of the --witness keys must have cosigned (default: all)
  --policy FILE          a C2SP tlog-policy file instead of (or as well as) --witness/--quorum: its quorum must
                         be met, its log line pins the key, its witness lines with a URL are asked too
  --timeout SECONDS      the time limit of every request: answer and body (default 10)

Exit codes:
  0  the checkpoint passed (and is recorded in FILE)
  1  usage, an unreadable or malformed state or policy file, or a verifier key that differs from FILE's
  2  FORK: a consistency proof fails to verify, or two signed checkpoints of one size have different roots
  3  ROLLBACK: the log now shows a smaller tree than it showed before
  4  UNREACHABLE: the log (or a proof it owes) did not answer in time, answered other than 200, or answered
     something that is not a signed checkpoint or a proof; nothing was proven, nothing is recorded
  5  WITNESS QUORUM NOT MET: too few of the pinned witnesses validly cosigned the checkpoint
  6  BAD SIGNATURE: the checkpoint (or one a witness serves) is not validly signed by the pinned log key`

/**
 * The commands that work on the database directly, loaded only when one runs: they need the services and the
 * database layers, whose modules take about as long to load as everything else the CLI runs (the offline checks
 * and `pv log monitor` start in about half the time without them).
 */
const databaseCommands = Effect.promise(() => import("./DatabaseCommands.js"))

const readText = (file: string, what: string) =>
  Effect.tryPromise({ try: () => readFile(file, "utf8"), catch: (error) => new Error(`cannot read ${what} ${file}: ${String((error as Error).message ?? error)}`) })

/** `--quorum N`: a positive integer, or unset. */
const quorumOf = (value: string | undefined): number | undefined | "invalid" =>
  value === undefined ? undefined : /^[1-9][0-9]{0,5}$/.test(value) ? Number(value) : "invalid"

const program = (argv: ReadonlyArray<string>): Effect.Effect<void, unknown> => {
  const [command, ...args] = argv
  switch (command) {
    case "migrate":
      return Effect.flatMap(databaseCommands, (commands) => commands.migrateCommand)
    case "keys":
      return Effect.flatMap(databaseCommands, (commands) => commands.keysCommand(args, usage))
    case "import":
      return args[0] === undefined
        ? fail("usage: pv import FILE.ndjson")
        : Effect.flatMap(databaseCommands, (commands) => commands.importCommand(args[0]!))
    case "verify-events": {
      const { values } = parseArgs({
        args: args as Array<string>,
        options: {
          "base-url": { type: "string" },
          "api-key": { type: "string" },
          "public-id": { type: "string" },
          file: { type: "string" }
        }
      })
      return verifyEventsCommand({
        ...(values["base-url"] !== undefined ? { baseUrl: values["base-url"] } : {}),
        ...(values["api-key"] !== undefined ? { apiKey: values["api-key"] } : {}),
        ...(values["public-id"] !== undefined ? { publicId: values["public-id"] } : {}),
        ...(values.file !== undefined ? { file: values.file } : {})
      }).pipe(Effect.asVoid)
    }
    case "verify-receipt": {
      const { values, positionals } = parseArgs({
        args: args as Array<string>,
        allowPositionals: true,
        options: {
          "verifier-key": { type: "string" },
          jwks: { type: "string" },
          receipt: { type: "string" },
          witness: { type: "string", multiple: true },
          quorum: { type: "string" },
          policy: { type: "string" }
        }
      })
      const quorum = quorumOf(values.quorum)
      if (quorum === "invalid") return fail("--quorum must be a positive integer")
      return positionals[0] === undefined
        ? fail("usage: pv verify-receipt FILE [--verifier-key KEY] [--jwks JWKS.json] [--receipt RECEIPT.json] [--witness VKEY]... [--quorum N] [--policy FILE]")
        : verifyReceiptCommand({
          file: positionals[0],
          verifierKey: values["verifier-key"],
          jwks: values.jwks,
          receipt: values.receipt,
          witnesses: values.witness,
          quorum,
          policy: values.policy
        }).pipe(Effect.asVoid)
    }
    case "log": {
      const [sub, ...rest] = args
      if (sub === "monitor" && rest.some((arg) => arg === "--help" || arg === "-h")) return print(monitorUsage)
      const { values } = parseArgs({
        args: rest as Array<string>,
        options: {
          "base-url": { type: "string" },
          state: { type: "string" },
          "verifier-key": { type: "string" },
          witness: { type: "string", multiple: true },
          quorum: { type: "string" },
          policy: { type: "string" },
          timeout: { type: "string" }
        }
      })
      const quorum = quorumOf(values.quorum)
      if (quorum === "invalid") return fail("--quorum must be a positive integer")
      const timeout = values.timeout === undefined ? undefined : /^[1-9][0-9]{0,3}$/.test(values.timeout) ? Number(values.timeout) * 1000 : "invalid"
      if (timeout === "invalid") return fail("--timeout must be a whole number of seconds from 1 to 9999")
      return sub !== "monitor" || values["base-url"] === undefined || values.state === undefined
        ? fail(`usage: ${monitorUsage}`)
        : Effect.gen(function*() {
          const policy = values.policy === undefined ? undefined : yield* readText(values.policy, "the policy")
          yield* logMonitorCommand({
            baseUrl: values["base-url"]!,
            state: values.state!,
            verifierKey: values["verifier-key"],
            witnesses: values.witness,
            quorum,
            policy,
            timeoutMs: timeout
          })
        })
    }
    case undefined:
    case "help":
    case "--help":
    case "-h":
      return print(usage)
    default:
      return fail(`unknown command '${command}'\n\n${usage}`)
  }
}

const argv = process.argv.slice(2)
if (argv[0] === "witness" && argv[1] === "serve" && argv.length === 2) {
  void import("../witness/Launch.js").then(({ launchWitness }) => launchWitness())
} else if (argv[0] === "serve") {
  // The server owns the process (signals, exit code), as with `npm start`.
  const { values } = parseArgs({ args: argv.slice(1), options: { workers: { type: "string" } } })
  void import("../app/Launch.js").then(({ launch, launchSettingsFromEnv }) => {
    const settings = launchSettingsFromEnv()
    const workers = values.workers === undefined ? settings.workers : Number(values.workers)
    if (!Number.isInteger(workers) || workers < 1) {
      console.error("--workers must be a positive integer")
      process.exitCode = 1
    } else launch({ ...settings, workers })
  })
} else {
  program(argv).pipe(
    Effect.catch((error) =>
      Effect.sync(() => {
        console.error(error instanceof Error ? error.message : typeof error === "object" && error !== null && "detail" in error ? (error as { detail: string }).detail : String(error))
        process.exitCode = error instanceof LogMonitorFailed ? MonitorExitCodes[error.failure] : 1
      })),
    NodeRuntime.runMain({ disableErrorReporting: false })
  )
}
