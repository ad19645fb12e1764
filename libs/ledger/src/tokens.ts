/** The lease of a process that serves requests (GatewayLease | null): null in the worker and the CLI. */
export const GATEWAY_LEASE = Symbol('GATEWAY_LEASE');
/** Where a contended account's commands are decided (LedgerForwarder | null): null unless SVC_PEER_FORWARDING=on or ledger. */
export const LEDGER_FORWARDER = Symbol('LEDGER_FORWARDER');
