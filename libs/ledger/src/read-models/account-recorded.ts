import type { RecordedEvent } from '@svc/eventstore';
import type { AccountEvent } from '../account';

/** An account event as recorded: `type` and `data` narrow together. */
export type AccountRecorded = { [T in AccountEvent['type']]: RecordedEvent<T, Extract<AccountEvent, { type: T }>['data']> }[AccountEvent['type']];

/** An account event of the given type(s), as recorded. */
export type RecordedOf<T extends AccountEvent['type']> = Extract<AccountRecorded, { type: T }>;
