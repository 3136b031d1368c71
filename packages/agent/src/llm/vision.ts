import { knownModelFacts, unknownModelFacts } from "./models.ts";
import type { LlmMessage } from "./types.ts";

/**
 * Whether `model` accepts images (input): the model table's word, and no for a model it does not
 * know (unknownModelFacts), which gets a note in place of each image rather than a request its
 * provider may refuse.
 */
export const acceptsImages = (model: string): boolean => (knownModelFacts(model) ?? unknownModelFacts).images;

/** The text that takes an image's place for a model that does not accept images. */
const imageNote = (model: string, count: number): string =>
  `[${count === 1 ? "An image was" : `${count} images were`} left out here: the model ${model} does not accept images.]`;

/**
 * The messages as `model` can take them: unchanged when it accepts images, else images replaced by
 * a note in their message's text (OpenHands drops them when vision is off; the note tells the model
 * something was there). A model the table does not know keeps the images the user sent (the user
 * chose both; its provider answers for it) and gets a note for those a tool produced.
 */
export const imagesFor = (model: string, messages: LlmMessage[]): LlmMessage[] => {
  if (acceptsImages(model)) return messages;
  const unknown = knownModelFacts(model) === null;
  return messages.map((m) => {
    if (m.role === "assistant" || !m.images?.length || (unknown && m.role === "user")) return m;
    const { images, ...rest } = m;
    const note = imageNote(model, images.length);
    return { ...rest, text: rest.text ? `${rest.text}\n${note}` : note };
  });
};
