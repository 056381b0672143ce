/**
 * The environment of a server started as a child process: only what the operating system and Node need
 * to run a process (PATH, HOME, temporary directory, locale, time zone) comes from the environment running
 * the tests, and everything else is stated by the caller. A developer's own `PV_*`, `DATABASE_URL`,
 * `REDIS_URL`, `OTEL_*` or any other secret never reaches the service under test.
 */
const passedThrough = ["PATH", "HOME", "TMPDIR", "TMP", "TEMP", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT", "SystemRoot"]

export const childEnvironment = (env: Record<string, string>): Record<string, string> => {
  const base: Record<string, string> = {}
  for (const name of passedThrough) {
    const value = process.env[name]
    if (value !== undefined) base[name] = value
  }
  return { ...base, ...env }
}
