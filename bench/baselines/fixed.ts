/** The fixed ~1 KB JSON body both HTTP baselines answer with. */
export const fixedDocument = {
  schema: "pv.bench.fixed.v1",
  items: Array.from({ length: 12 }, (_, i) => ({ id: `item-${i}`, value: "x".repeat(48), n: i }))
}
export const fixedJson = JSON.stringify(fixedDocument)
