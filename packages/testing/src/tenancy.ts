/**
 * The environment of an API without tenancy limits (rate limits, quotas, size caps all 0 = off),
 * for tests and bench rows that measure something else: a burst of starts by one user, a load of
 * reads by one key. A test of the limits turns on the ones it proves.
 */
export const tenancyLimitsOff: Readonly<Record<string, string>> = {
  RATE_LIMIT_PER_MINUTE: "0",
  RATE_LIMIT_STARTS_PER_MINUTE: "0",
  RATE_LIMIT_MESSAGES_PER_MINUTE: "0",
  MAX_SANDBOXES_PER_USER: "0",
  MAX_STARTS_IN_FLIGHT_PER_USER: "0",
  MAX_KEYS_PER_USER: "0",
  MAX_MESSAGE_BYTES: "0",
  MAX_EVENTS_PER_CONVERSATION: "0",
};
