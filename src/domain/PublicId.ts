import { Schema } from "effect"

/** `DET-V1-*` or `QUAL-V1-*`, upper-case alphanumerics and inner hyphens, at most 64 characters after the prefix. */
export const PublicIdPattern = /^(DET|QUAL)-V1-[A-Z0-9](?:[A-Z0-9-]{0,62}[A-Z0-9])?$/

export const isPublicId = (input: string): boolean => PublicIdPattern.test(input)

export const PublicId = Schema.String.pipe(
  Schema.pattern(PublicIdPattern, {
    message: () => "must match ^(DET|QUAL)-V1-[A-Z0-9](?:[A-Z0-9-]{0,62}[A-Z0-9])?$"
  }),
  Schema.brand("PublicId"),
  Schema.annotations({
    identifier: "PublicId",
    description: "Public determination identifier: DET-V1-* or QUAL-V1-*",
    examples: ["DET-V1-ACME-0001" as any]
  })
)
export type PublicId = typeof PublicId.Type
