import { existsSync, mkdirSync } from "node:fs"
import { basename, dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium, type Browser, type Page } from "playwright-core"
import type { TestContext } from "vitest"
import { cacheDir } from "../support/scratch.js"

/** Debian's chromium; no browser download works here, so the tests never fetch one. */
export const chromiumPath = process.env.PV_CHROMIUM_PATH ?? "/usr/bin/chromium"

const chromiumArgs = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/** Starts chromium, or fails the suite with what to do: a missing browser must never pass silently. */
export const launchChromium = async (): Promise<Browser> => {
  if (!existsSync(chromiumPath)) {
    throw new Error(
      `The browser tests need Debian's chromium at ${chromiumPath}, and it is not there. Install it as root: ` +
        "`apt-get update && apt-get install -y chromium` (`npm test` does this: scripts/ensure-chromium.sh), or point PV_CHROMIUM_PATH at a Chromium binary."
    )
  }
  return chromium.launch({ executablePath: chromiumPath, args: chromiumArgs, timeout: 60_000 })
}

/**
 * A failed test leaves a screenshot of the whole page where it outlives the run (`cacheDir`/pv-screenshots), named
 * after its file and test, for whoever reads the failure.
 */
export const screenshotOnFailure = (test: TestContext, page: Page): void =>
  test.onTestFailed(async () => {
    const dir = join(cacheDir(), "pv-screenshots")
    mkdirSync(dir, { recursive: true })
    const name = `${basename(test.task.file.name, ".browser.test.ts")}--${test.task.name}`.replace(/[^A-Za-z0-9-]+/g, "-").slice(0, 120)
    const path = join(dir, `${name}.png`)
    await page.screenshot({ path, fullPage: true, timeout: 10_000 })
      .then(() => console.warn(`the page when the test failed: ${path}`), (error: unknown) => console.warn(`no screenshot of the failed test: ${String(error)}`))
  })

/**
 * A file's one page, in a context of its own (which may write the clipboard), with its console errors
 * (`collectPageErrors`). Each test loads the page afresh in it (`loadPage`) rather than opening a context and page of
 * its own: each new page started renderer processes, a navigation within the origin reuses the page's (chromium took
 * ~41 CPU-s for page.browser.test.ts with a page per test, ~15 with one).
 */
export const openPage = async (browser: Browser): Promise<{ readonly page: Page; readonly errors: Array<string> }> => {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 }, colorScheme: "light" })
  // For `pasteText`: the page itself never reads the clipboard.
  await context.grantPermissions(["clipboard-write"])
  const page = await context.newPage()
  return { page, errors: collectPageErrors(page) }
}

/**
 * Pastes `text` into a field as a reader does (through the clipboard, Ctrl+V) after the checks `fill` makes (the
 * field is visible, enabled and editable; it is emptied). `fill` enters text as typed, line by line: a JSON of 100
 * lines cost the renderer ~150 ms of CPU each time, its paste ~25 ms.
 */
export const pasteText = async (page: Page, selector: string, text: string): Promise<void> => {
  await page.fill(selector, "")
  // The DOM's types through globalThis: the tests are type-checked without them.
  await page.evaluate((pasted) => (globalThis as any).navigator.clipboard.writeText(pasted), text)
  await page.keyboard.press("ControlOrMeta+V")
  const value = await page.inputValue(selector)
  if (value !== text) throw new Error(`the paste into ${selector} left ${value.length} characters there, not the ${text.length} pasted`)
}

/**
 * A fresh document of `url` in the file's page, ready for the test (`data-ready`): the routes and the errors of
 * the test before are gone; nothing of it but the context's HTTP cache remains (the page stores nothing).
 */
export const loadPage = async (page: Page, errors: Array<string>, url: string): Promise<void> => {
  await page.unrouteAll()
  errors.length = 0
  await page.goto(url)
  await page.locator("body[data-ready=true]").waitFor()
}

/** `PV_SCREENSHOTS=1 npm run test:web` refreshes docs/screenshots. */
const refreshingScreenshots = process.env.PV_SCREENSHOTS === "1"
export const screenshotsDir = join(dirname(fileURLToPath(import.meta.url)), "../../docs/screenshots")

/**
 * A screenshot of one part of the page (a CSS selector) into `screenshotsDir`/<name>.png, for the docs: taken only
 * when they are refreshed. Nothing is asserted on them, and other runs wrote them into the run's scratch directory,
 * removed when it ends: at ~0.4 s and ~0.1 CPU-s each they were a tenth of a browser file's time, seen by no one.
 */
export const screenshot = async (page: Page, name: string, selector: string): Promise<void> => {
  if (!refreshingScreenshots) return
  mkdirSync(screenshotsDir, { recursive: true })
  // Pasted JSON reads from its start, not from where the caret was left.
  await page.locator("textarea").evaluateAll((areas) => areas.forEach((area) => area.scrollTop = 0))
  await page.locator(selector).screenshot({ path: join(screenshotsDir, `${name}.png`) })
}

/**
 * Console errors and uncaught exceptions of a page, so a CSP violation or a script failure fails the
 * test. The browser's own "Failed to load resource" lines for answers the page asked for (a 404
 * problem it then shows) are not failures.
 */
export const collectPageErrors = (page: Page): Array<string> => {
  const errors: Array<string> = []
  page.on("console", (message) => {
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) errors.push(message.text())
  })
  page.on("pageerror", (error) => errors.push(String(error)))
  return errors
}
