import { launch, workersFromEnv } from "./app/Launch.js"

launch(workersFromEnv())
