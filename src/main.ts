import { launch, launchSettingsFromEnv } from "./app/Launch.js"

launch(launchSettingsFromEnv())
