// Exports no function: a consumer refuses it at consume().
export const answer = 42;
