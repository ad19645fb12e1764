/**
 * How the configuration reads its environment variables, and the error that stops the process
 * at start naming the variable (ARCHITECTURE section 7).
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}

export type Env = Record<string, string | undefined>;

/** The readers of one environment, each naming its variable in what it refuses. */
export function envReader(env: Env) {
  const text = (name: string): string | null => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? null : v.trim();
  };
  const url = (name: string, protocols: string[]): string | null => {
    const v = text(name);
    if (v === null) return null;
    let parsed: URL;
    try {
      parsed = new URL(v);
    } catch {
      throw new ConfigError(name, `not a URL (expected ${protocols.join(' or ')}...)`);
    }
    if (!protocols.includes(parsed.protocol)) {
      throw new ConfigError(name, `expected a ${protocols.join(' or ')} URL, got ${parsed.protocol}`);
    }
    return v;
  };
  const integer = (name: string, fallback: number, min: number, max: number): number => {
    const v = text(name);
    if (v === null) return fallback;
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
      throw new ConfigError(name, `expected an integer from ${min} to ${max}, got ${JSON.stringify(v)}`);
    }
    return Number(v);
  };
  const onOff = (name: string, fallback: boolean): boolean => {
    const v = text(name);
    if (v === null) return fallback;
    if (v !== 'on' && v !== 'off') throw new ConfigError(name, `expected on or off, got ${JSON.stringify(v)}`);
    return v === 'on';
  };
  const oneOf = <T extends string>(name: string, values: readonly T[]): T | null => {
    const v = text(name);
    if (v === null) return null;
    if (!values.includes(v as T)) throw new ConfigError(name, `expected one of ${values.join(', ')}, got ${JSON.stringify(v)}`);
    return v as T;
  };
  const trueFalse = (name: string, fallback: boolean): boolean => {
    const v = text(name);
    if (v === null) return fallback;
    if (v === 'true' || v === 'on') return true;
    if (v === 'false' || v === 'off') return false;
    throw new ConfigError(name, `expected true or false (or on or off), got ${JSON.stringify(v)}`);
  };
  return { text, url, integer, onOff, oneOf, trueFalse };
}

export type EnvReader = ReturnType<typeof envReader>;
