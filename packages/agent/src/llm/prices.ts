// The prices are the model table's now (models.ts); this name stays while the agent core's split lands.
export { costOf, type ModelPrice, type PriceTable, priceOf } from "./models.ts";
