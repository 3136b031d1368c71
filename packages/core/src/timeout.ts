/**
 * `promise`, or a rejection with `message` once `ms` have passed without an answer. The timer is
 * cleared either way, so a settled call keeps no timer (nor the process) alive. The call itself is
 * not stopped: what it still does is the caller's to bound or ignore.
 */
export const withTimeout = async <T>(promise: Promise<T>, ms: number, message: string): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(message)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
};
