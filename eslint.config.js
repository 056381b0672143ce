// Lint: typescript-eslint's recommended rules; the type checker does the rest (`npm run check`).
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["node_modules/", "dist/", ".pv-data/", ".pv-test-data/", "bench/results/", ".profdist/"] },
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-namespace": "off"
    }
  }
)
