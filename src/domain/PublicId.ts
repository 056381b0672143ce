import { type Brand, Effect, Schema } from "effect"
import { InvalidPublicId } from "./Problem.js"

/** `DET-V1-*` or `QUAL-V1-*`, upper-case alphanumerics and inner hyphens, at most 64 characters after the prefix. */
export const PublicIdPattern = /^(DET|QUAL)-V1-[A-Z0-9](?:[A-Z0-9-]{0,62}[A-Z0-9])?$/u

export const isPublicId = (input: string): boolean => PublicIdPattern.test(input)

export const PublicId = Schema.String.check(
  Schema.isPattern(PublicIdPattern, {
    message: "must match ^(DET|QUAL)-V1-[A-Z0-9](?:[A-Z0-9-]{0,62}[A-Z0-9])?$"
  })
).pipe(
  Schema.brand("PublicId"),
  Schema.annotate({
    identifier: "PublicId",
    description: "Public determination identifier: DET-V1-* or QUAL-V1-*",
    examples: ["DET-V1-ACME-0001" as Brand.Branded<string, "PublicId">]
  })
)
export type PublicId = typeof PublicId.Type

/** The 400 of docs/API.md §2 for a malformed id: the one decoder of a public id at every edge. */
export const requirePublicId = (input: string): Effect.Effect<PublicId, InvalidPublicId> =>
  isPublicId(input)
    ? Effect.succeed(input as PublicId)
    : Effect.fail(new InvalidPublicId({ detail: `'${input.slice(0, 80)}' is not a DET-V1-* or QUAL-V1-* identifier` }))
