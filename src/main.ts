import { launch, workersFromEnv } from "./http/Launch.js"

launch(workersFromEnv())
