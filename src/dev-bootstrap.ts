import type { CommandBus } from '@nestjs/cqrs';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Position } from '../libs/eventstore/src/port';
import { IdentityCommand } from '../libs/identity/src/identity.module';
import type { KeyScope } from '../libs/identity/src/key';
import { generateKeySecret, hashKeySecret, secretHint } from '../libs/identity/src/secrets';
import { LedgerCommand } from '../libs/ledger/src/ledger.module';
import { usdToNano } from '../libs/platform/src/money';
import type { Runtime } from './runtime';

export interface DevKeys {
  account_id: string;
  management_key: string;
  api_key: string;
  admin_token: string;
}

export const DEV_CREDITS_USD = '10.00';

export function devKeysPath(dataDir: string): string {
  return join(dataDir, 'dev-keys.json');
}

/**
 * First start on an empty data directory: a dev account with $10.00 of credits, a management
 * key and a full test key, written to dev-keys.json. Later starts reuse that file.
 */
export async function ensureDevKeys(runtime: Runtime, commands: CommandBus): Promise<{ keys: DevKeys; created: boolean }> {
  const path = devKeysPath(runtime.config.dataDir);
  if (existsSync(path)) return { keys: JSON.parse(readFileSync(path, 'utf8')) as DevKeys, created: false };

  const accountId = `acc_${randomBytes(8).toString('hex')}`;
  const metadata = { actor: 'dev-bootstrap' };
  await commands.execute(new LedgerCommand(accountId, { type: 'OpenAccount', accountId }, metadata));
  const credited = await commands.execute(
    new LedgerCommand(accountId, { type: 'AddCredits', amountNano: usdToNano(DEV_CREDITS_USD), reason: 'signup' }, metadata),
  );
  const createKey = async (name: string, scope: KeyScope): Promise<{ secret: string; position: Position }> => {
    const secret = generateKeySecret('test');
    const keyId = `key_${randomUUID()}`;
    const created = await commands.execute(
      new IdentityCommand(
        keyId,
        { type: 'CreateKey', keyId, accountId, name, scope, environment: 'test', secretHash: hashKeySecret(secret), secretHint: secretHint(secret) },
        metadata,
      ),
    );
    return { secret, position: created.appended!.position };
  };
  const management = await createKey('dev management key', 'management');
  const full = await createKey('dev key', 'full');

  // The keys must authenticate as soon as they are printed.
  const last = [credited.appended!.position, management.position, full.position].sort().at(-1)!;
  await runtime.projections.waitFor(last, undefined, 30_000);

  const keys: DevKeys = {
    account_id: accountId,
    management_key: management.secret,
    api_key: full.secret,
    admin_token: runtime.config.adminToken ?? randomBytes(24).toString('base64url'),
  };
  mkdirSync(runtime.config.dataDir, { recursive: true });
  writeFileSync(path, `${JSON.stringify(keys, null, 2)}\n`, { mode: 0o600 });
  return { keys, created: true };
}
