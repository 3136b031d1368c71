/** Key names the model may send with `is_input` (OpenHands' names), as tmux names them. */
const namedKeys: Record<string, string> = {
  ENTER: "Enter",
  TAB: "Tab",
  BS: "BSpace",
  ESC: "Escape",
  UP: "Up",
  DOWN: "Down",
  LEFT: "Left",
  RIGHT: "Right",
  HOME: "Home",
  END: "End",
  PGUP: "PPage",
  PGDN: "NPage",
};

/**
 * The tmux key for a special key name (`C-c`, `CTRL-d`, `CTRL+z`, `UP`, `TAB`...), or null when
 * `text` is text to type.
 */
export const specialKey = (text: string): string | null => {
  const t = text.trim();
  const named = namedKeys[t.toUpperCase()];
  if (named) return named;
  const ctrl = /^(?:C-|CTRL-|CTRL\+)([a-z])$/i.exec(t);
  return ctrl ? `C-${ctrl[1]?.toLowerCase()}` : null;
};
