import { Cause, Effect, Exit, Layer, Runtime } from "effect"

/** `pv witness serve`: one process (its embedded database belongs to it), stopped cleanly by SIGTERM/SIGINT. */
export const launchWitness = async (): Promise<void> => {
  const [{ runMain }, { AppConfig, baseAppConfig }, { witnessSettings }] = await Promise.all([
    import("@effect/platform-node/NodeRuntime"),
    import("../platform/Config.js"),
    import("./Settings.js")
  ])
  // The settings first (the process environment): a witness refused for them is refused before it loads its server
  // and database modules, and before it creates or migrates a database it will never use.
  const settings = Layer.merge(Layer.effect(AppConfig, baseAppConfig), Layer.effectDiscard(Effect.orDie(witnessSettings)))
  Layer.unwrap(Effect.promise(() => import("./WitnessServer.js")).pipe(Effect.map(({ WitnessMainLive }) => WitnessMainLive))).pipe(
    Layer.provide(settings),
    Layer.launch,
    (program) =>
      runMain(program, {
        teardown: (exit, onExit) =>
          Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)
      })
  )
}
