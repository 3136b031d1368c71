import type { LlmMessage } from "./types.ts";

/**
 * Model families that take images in a request, by name (provider prefix ignored): every Claude
 * from 3 on, GPT-4o, GPT-4.1, GPT-5 and the o-series reasoning models but o1-mini and o3-mini, and
 * Gemini. DeepSeek's chat models, GPT-3.5 and the models a deployment serves itself are not known
 * to: they get a note in place of each image rather than a request the provider refuses.
 */
const IMAGE_MODELS = [
  /^claude-(3|opus|sonnet|haiku)/,
  /^gpt-(4o|4\.1|4-turbo|5)/,
  /^o(1|3|4)(-(?!mini)|$)/,
  /^o4-mini/,
  /^gemini-/,
];

/** Whether `model` accepts images (input). */
export const acceptsImages = (model: string): boolean => {
  const name = model.replace(/^[a-z-]+\//i, "").toLowerCase();
  return IMAGE_MODELS.some((re) => re.test(name));
};

/** The text that takes an image's place for a model that does not accept images. */
const imageNote = (model: string, count: number): string =>
  `[${count === 1 ? "An image was" : `${count} images were`} left out here: the model ${model} does not accept images.]`;

/**
 * The messages as `model` can take them: unchanged when it accepts images, else each message's
 * images replaced by a note in its text (OpenHands drops them when vision is off; the note tells
 * the model something was there).
 */
export const imagesFor = (model: string, messages: LlmMessage[]): LlmMessage[] => {
  if (acceptsImages(model)) return messages;
  return messages.map((m) => {
    if (m.role === "assistant" || !m.images?.length) return m;
    const { images, ...rest } = m;
    const note = imageNote(model, images.length);
    return { ...rest, text: rest.text ? `${rest.text}\n${note}` : note };
  });
};
