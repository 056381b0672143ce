/** `pv witness serve`: one process (its embedded database belongs to it), stopped cleanly by SIGTERM/SIGINT. */
export const launchWitness = async (): Promise<void> => {
  const [{ runMain }, { Cause, Exit, Layer, Runtime }, { WitnessMainLive }] = await Promise.all([
    import("@effect/platform-node/NodeRuntime"),
    import("effect"),
    import("./WitnessServer.js")
  ])
  WitnessMainLive.pipe(
    Layer.launch,
    (program) =>
      runMain(program, {
        teardown: (exit, onExit) =>
          Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)
      })
  )
}
