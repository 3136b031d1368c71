// The context windows are the model table's now (models.ts); this name stays while the agent core's split lands.
export { type ContextWindowTable, contextWindowOf } from "./models.ts";
