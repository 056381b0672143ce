import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { ServerLive } from "./http/Server.js"
import { AppConfigLive } from "./platform/Config.js"

ServerLive.pipe(Layer.provide(AppConfigLive), Layer.launch, NodeRuntime.runMain)
