import { dirname, resolve, sep } from "node:path"
import ts from "typescript"

/**
 * `tsc -p <tsconfig>` (noEmit) for a consumer of the package, with every diagnostic tsc reports for the project's
 * own files and the shipped declarations, but the declaration files of other packages (effect's, @types/node) only
 * as far as checking those needs them: the consumer's tsconfig has `skipLibCheck: false`, so the package's
 * declarations are checked in full, but checking all of effect's too was over half the CPU of the whole check (14.7 → 6.4 s) and
 * says nothing about this package. Run by package.test.ts as a child (Node's type stripping):
 * `node typeCheck.ts <tsconfig> <package directory>`; prints `{ "checked": [...] }` (the files checked in full,
 * relative to the tsconfig's directory) and exits 0, or prints the diagnostics as tsc does and exits 1.
 */
const [configArgument, packageArgument] = process.argv.slice(2)
if (configArgument === undefined || packageArgument === undefined) {
  throw new Error("usage: node typeCheck.ts <tsconfig> <package directory>")
}
const configPath = resolve(configArgument)
const packageDirectory = resolve(packageArgument) + sep
const root = dirname(configPath)

const configErrors: Array<ts.Diagnostic> = []
const config = ts.getParsedCommandLineOfConfigFile(configPath, undefined, {
  ...ts.sys,
  onUnRecoverableConfigFileDiagnostic: (diagnostic) => configErrors.push(diagnostic)
})
if (config === undefined) throw new Error(ts.formatDiagnostics(configErrors, { getCanonicalFileName: (name) => name, getCurrentDirectory: () => root, getNewLine: () => "\n" }))
if (config.options.skipLibCheck === true) throw new Error(`${configPath}: skipLibCheck would leave the shipped declarations unchecked`)

const program = ts.createProgram({ rootNames: config.fileNames, options: config.options, configFileParsingDiagnostics: config.errors })
/** The consumer's own files and the package's declarations: what `tsc` checks with skipLibCheck, plus the package. */
const checked = program.getSourceFiles().filter((file) =>
  resolve(file.fileName).startsWith(packageDirectory) || !program.isSourceFileFromExternalLibrary(file) && !program.isSourceFileDefaultLibrary(file) && !file.isDeclarationFile)
const diagnostics = [
  ...config.errors,
  ...program.getOptionsDiagnostics(),
  ...program.getGlobalDiagnostics(),
  ...program.getSyntacticDiagnostics(),
  ...checked.flatMap((file) => program.getSemanticDiagnostics(file))
]
if (diagnostics.length > 0) {
  process.stdout.write(ts.formatDiagnostics(diagnostics, { getCanonicalFileName: (name) => name, getCurrentDirectory: () => root, getNewLine: () => "\n" }))
  process.exitCode = 1
} else {
  process.stdout.write(JSON.stringify({ checked: checked.map((file) => resolve(file.fileName).slice(root.length + 1).split(sep).join("/")) }))
}
